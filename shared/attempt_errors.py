"""Why an attempt failed: the error codes the engine produces, the class each belongs to
(the retry policy keys on it, ``job_service.domain.retry``) and what the job's owner is told
of each class. ``shared.errors`` re-exports these names beside ``ExecutionError``."""

from __future__ import annotations

from enum import StrEnum


class ErrorClass(StrEnum):
    """The family of an attempt's error code; the retry policy keys on it."""

    PROVIDER = "PROVIDER"  # timeout, 5xx, rate limit: retry with backoff
    VALIDATION = "VALIDATION"  # output failed its schema: retry
    CONTENT_SAFETY = "CONTENT_SAFETY"  # never retried
    TIMEOUT = "TIMEOUT"  # the definition's abort strategy decides
    CREDENTIAL = "CREDENTIAL"  # never retried
    CANCELLED = "CANCELLED"  # the job ends cancelled
    INTERNAL = "INTERNAL"  # retried once
    JOB = "JOB"  # the job's own code declared the input unworkable: never retried
    LEASE = "LEASE"  # the worker vanished (lease expired, or it disconnected): retry
    WORKER_SHUTDOWN = "WORKER_SHUTDOWN"  # handed back by a draining worker: run again now
    # not a failure: the job's code sleeps or waits for a signal (ctx.sleep,
    # ctx.wait_for_signal): run again at the wake time, the attempt handed back
    SUSPENDED = "SUSPENDED"
    DEADLINE = "DEADLINE"  # the job's deadline passed (CreateJob's deadline): never retried


class ErrorCode(StrEnum):
    """The attempt error codes the engine itself produces. Job types may add their own
    codes as long as the prefix names an ``ErrorClass``."""

    PROVIDER_TIMEOUT = "PROVIDER_TIMEOUT"
    PROVIDER_UNAVAILABLE = "PROVIDER_UNAVAILABLE"
    PROVIDER_RATE_LIMITED = "PROVIDER_RATE_LIMITED"
    PROVIDER_REQUEST_REJECTED = "PROVIDER_REQUEST_REJECTED"
    VALIDATION_OUTPUT_SCHEMA = "VALIDATION_OUTPUT_SCHEMA"
    VALIDATION_OUTPUT_MALFORMED = "VALIDATION_OUTPUT_MALFORMED"
    VALIDATION_OUTPUT_REJECTED = "VALIDATION_OUTPUT_REJECTED"
    CONTENT_SAFETY_BLOCKED = "CONTENT_SAFETY_BLOCKED"
    TIMEOUT = "TIMEOUT"
    CREDENTIAL_INVALID = "CREDENTIAL_INVALID"
    CREDENTIAL_FORBIDDEN = "CREDENTIAL_FORBIDDEN"
    CANCELLED = "CANCELLED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    # The job service refused an attempt's projection (a child job it may not create, ...).
    INTERNAL_PROJECTION_REFUSED = "INTERNAL_PROJECTION_REFUSED"
    JOB_REJECTED = "JOB_REJECTED"
    LEASE_EXPIRED = "LEASE_EXPIRED"
    WORKER_SHUTDOWN = "WORKER_SHUTDOWN"
    # The worker process holding the lease is gone: a new process opened a session under
    # its worker id (it was restarted), or, for an older worker that names no process, its
    # session ended without a goodbye and no new one came within the grace. Class LEASE,
    # like LEASE_EXPIRED (its name predates no class prefix).
    WORKER_DISCONNECTED = "WORKER_DISCONNECTED"
    # A user's key was deleted, or cannot be opened with this deployment's master keys.
    CREDENTIAL_UNAVAILABLE = "CREDENTIAL_UNAVAILABLE"
    # The job never ran: a job it depended on ended failed or cancelled, and its dependency
    # policy is "fail" (DEPENDENCY_FAILED) or "cancel" (DEPENDENCY_CANCELLED).
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"
    DEPENDENCY_CANCELLED = "DEPENDENCY_CANCELLED"
    # The job's code asked for its durable steps in another order than an earlier attempt
    # recorded them (worker_service.durable_steps): a retry would do the same. Class JOB.
    NONDETERMINISTIC = "NONDETERMINISTIC"
    # The job's code sleeps (ctx.sleep) or waits for a signal (ctx.wait_for_signal): the
    # attempt ends, the job runs again at the wake time (a signal wakes a waiting one
    # sooner). Class SUSPENDED: not a failure, the attempt is handed back.
    SUSPENDED_SLEEP = "SUSPENDED_SLEEP"
    SUSPENDED_SIGNAL = "SUSPENDED_SIGNAL"
    # The job had not finished by its deadline (CreateJob's ``deadline``, or its type's
    # ``deadline_seconds``): the job service ended it, whatever its retries and waits, and
    # stopped the attempt that was running then. Class DEADLINE: final.
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"


# Engine codes whose prefix does not name their class.
_CLASS_OF = {
    ErrorCode.WORKER_DISCONNECTED.value: ErrorClass.LEASE,
    ErrorCode.DEPENDENCY_FAILED.value: ErrorClass.JOB,
    ErrorCode.DEPENDENCY_CANCELLED.value: ErrorClass.CANCELLED,
    ErrorCode.NONDETERMINISTIC.value: ErrorClass.JOB,
}


def classify(code: str) -> ErrorClass:
    """The class of an attempt error code; unknown codes count as internal errors."""
    if code in _CLASS_OF:
        return _CLASS_OF[code]
    for cls in sorted(ErrorClass, key=lambda c: -len(c.value)):
        if code == cls.value or code.startswith(cls.value + "_"):
            return cls
    return ErrorClass.INTERNAL


# What the job's owner is told; never the internal detail.
PUBLIC_MESSAGES: dict[ErrorClass, str] = {
    ErrorClass.PROVIDER: "The model provider did not answer successfully.",
    ErrorClass.VALIDATION: "The model's answer did not have the expected shape.",
    ErrorClass.CONTENT_SAFETY: "The content was blocked by a safety check.",
    ErrorClass.TIMEOUT: "The job ran longer than its time limit.",
    ErrorClass.CREDENTIAL: "The credential for the model provider was rejected.",
    ErrorClass.CANCELLED: "The job was cancelled.",
    ErrorClass.INTERNAL: "The job failed because of an internal error.",
    ErrorClass.JOB: "The job could not be completed with the given input.",
    ErrorClass.LEASE: "The worker running the job stopped responding.",
    ErrorClass.WORKER_SHUTDOWN: "The worker running the job shut down.",
    ErrorClass.SUSPENDED: "The job is waiting: asleep until a time, or for a signal.",
    ErrorClass.DEADLINE: "The job did not finish by its deadline.",
}


def public_message(code: str) -> str:
    return PUBLIC_MESSAGES[classify(code)]
