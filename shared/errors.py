"""The one error tree of the product, and the codes it speaks.

Two vocabularies live here, because both services must agree on them:

* ``Reason`` — why an API call was refused. Each travels to the caller as the reason of a
  ``google.rpc.ErrorInfo`` next to a gRPC status code (see ``shared.rpc_errors``).
* ``ExecutionError`` codes — why an *attempt* failed (``job.error_code``). The prefix is the
  error class, and the class decides retries (``classify``; the policy itself lives in
  ``job_service.domain.retry``).

Every exception the product raises on purpose, by who gets to see it. Classes defined
elsewhere are named with the concern of the module that holds them.

API errors: a refused call. The job service's error interceptor is the one place that
turns them into a gRPC status (with one ErrorInfo); clients turn the status back into the
same class (``shared.rpc_errors``). The message is public: the caller reads it::

    JobsError                      (reason, public message, field violations, retry_after_s)
    ├── InvalidInput               INVALID_ARGUMENT    INVALID_INPUT
    │   └── UnknownJobType         INVALID_ARGUMENT    UNKNOWN_JOB_TYPE
    ├── JobNotFound                NOT_FOUND           JOB_NOT_FOUND
    ├── CredentialNotFound         NOT_FOUND           CREDENTIAL_NOT_FOUND
    ├── ScheduleNotFound           NOT_FOUND           SCHEDULE_NOT_FOUND
    ├── CredentialUnavailable      FAILED_PRECONDITION CREDENTIAL_UNAVAILABLE
    ├── JobNotCancellable          FAILED_PRECONDITION JOB_NOT_CANCELLABLE
    ├── JobAlreadyCancelled        FAILED_PRECONDITION JOB_ALREADY_CANCELLED
    ├── JobNotRetryable            FAILED_PRECONDITION JOB_NOT_RETRYABLE
    ├── LiveChildExists            FAILED_PRECONDITION LIVE_CHILD_EXISTS
    ├── LiveRetryExists            FAILED_PRECONDITION LIVE_RETRY_EXISTS
    ├── IdempotencyKeyReused       FAILED_PRECONDITION IDEMPOTENCY_KEY_REUSED
    ├── JobFinished                FAILED_PRECONDITION JOB_FINISHED
    ├── TooManyJobs                RESOURCE_EXHAUSTED  TOO_MANY_JOBS   (+ RetryInfo)
    ├── QuotaExceeded              RESOURCE_EXHAUSTED  QUOTA_EXCEEDED  (+ RetryInfo)
    ├── SignalLimitReached         RESOURCE_EXHAUSTED  SIGNAL_LIMIT_REACHED
    ├── LeaseLost                  ABORTED             LEASE_LOST
    ├── Unauthenticated            UNAUTHENTICATED     UNAUTHENTICATED
    ├── PermissionDenied           PERMISSION_DENIED   PERMISSION_DENIED
    ├── PlatformUnavailable        UNAVAILABLE         PLATFORM_UNAVAILABLE
    ├── InternalError              INTERNAL            INTERNAL
    │
    │   The job's own failure: what an attempt ends with, never the status of a call.
    └── ExecutionError             raised by job code in a worker: its code becomes
                                   job.error_code, its class decides retries; the owner
                                   reads the public message of the class, operators the
                                   detail

Configuration errors: raised while a process starts. It prints one sentence and exits 2
(invalid configuration) or 3 (cannot start); none is ever translated into a status::

    ValueError
    ├── AuthConfigError            job service auth: the token table is invalid      exit 2
    ├── MasterKeyError             credential sealing: a malformed master key; it is
    │                              reported among the invalid settings               exit 2
    ├── ClientConfigError          gRPC client: TLS or auth settings incomplete or
    │                              unreadable (worker)                               exit 2
    └── DefinitionError            job type registry: a definition that cannot be
                                   registered; a programming error, so it fails the
                                   start with its traceback
    RuntimeError
    └── MasterKeyMissing           credential vault: stored keys are sealed under a
                                   master key that is not configured                 exit 2
    StartupError                   start-up: the process cannot start                exit 3
    └── DependencyUnavailable      start-up: PostgreSQL, NATS or the job service stayed
                                   unreachable for the start-up timeout              exit 3
    UsageError                     jobctl command line: arguments that parse but make
                                   no sense                                          exit 2

Internal control flow: raised and caught inside one service, each translated next to
where it is raised; no caller ever sees one as such::

    IllegalTransition              job lifecycle: a step the status does not allow; a
                                   bug, so the interceptor answers InternalError
    SealBroken                     credential sealing: a sealed key does not open; the
                                   credential vault logs it and raises
                                   CredentialUnavailable
    ConnectionError
    └── DatabaseUnreachable        job service postgres adapter: no new connection; an
                                   OSError, so the interceptor answers
                                   PlatformUnavailable, and start-up retries it
    LookupError
    └── PromptNotFound             prompt registry: no such prompt version; the job
                                   raises ExecutionError instead
    ExecutorUnreachable            worker's executor port: the call may not have got
                                   through; retried
    ExecutorCallFailed             worker's executor port: the job service failed the
                                   call without a reason; not retried
    DispatchUnavailable            worker's dispatch port: NATS cannot be read right
                                   now; intake fetches again shortly
    ReplicaExited                  job service processes: one of the replicas
                                   JOBS_SERVICE_PROCESSES started exited; the others
                                   stop, and the parent exits with its status
    DevstackError                  local development stack: start-up failed or a child
                                   died; everything stops, exit 1
    Interrupted                    local development stack: Ctrl-C or SIGTERM during
                                   start-up; everything stops, exit 0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Reason(StrEnum):
    """Machine-readable reasons carried in ``google.rpc.ErrorInfo``."""

    INVALID_INPUT = "INVALID_INPUT"
    UNKNOWN_JOB_TYPE = "UNKNOWN_JOB_TYPE"
    JOB_NOT_FOUND = "JOB_NOT_FOUND"
    CREDENTIAL_NOT_FOUND = "CREDENTIAL_NOT_FOUND"
    SCHEDULE_NOT_FOUND = "SCHEDULE_NOT_FOUND"
    CREDENTIAL_UNAVAILABLE = "CREDENTIAL_UNAVAILABLE"
    JOB_NOT_CANCELLABLE = "JOB_NOT_CANCELLABLE"
    JOB_ALREADY_CANCELLED = "JOB_ALREADY_CANCELLED"
    JOB_NOT_RETRYABLE = "JOB_NOT_RETRYABLE"
    LIVE_CHILD_EXISTS = "LIVE_CHILD_EXISTS"
    LIVE_RETRY_EXISTS = "LIVE_RETRY_EXISTS"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    JOB_FINISHED = "JOB_FINISHED"
    TOO_MANY_JOBS = "TOO_MANY_JOBS"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    SIGNAL_LIMIT_REACHED = "SIGNAL_LIMIT_REACHED"
    LEASE_LOST = "LEASE_LOST"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    PLATFORM_UNAVAILABLE = "PLATFORM_UNAVAILABLE"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


class JobsError(Exception):
    """Root of the product's own errors: every error the API reports on purpose, and
    ``ExecutionError``, the failure of an attempt. ``retry_after_s`` (set on the
    RESOURCE_EXHAUSTED errors) travels as a ``google.rpc.RetryInfo``; ``metadata`` (the ids
    involved, e.g. ``job_id``) as the ``google.rpc.ErrorInfo``'s metadata."""

    reason: Reason = Reason.INTERNAL

    def __init__(
        self,
        message: str,
        violations: list[FieldViolation] | None = None,
        retry_after_s: float | None = None,
        *,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.violations = violations or []
        self.retry_after_s = retry_after_s
        self.metadata = metadata or {}


class InvalidInput(JobsError):
    reason = Reason.INVALID_INPUT


class UnknownJobType(InvalidInput):
    reason = Reason.UNKNOWN_JOB_TYPE


class JobNotFound(JobsError):
    reason = Reason.JOB_NOT_FOUND


class CredentialNotFound(JobsError):
    """No such credential for this user (another user's is not found either), or the
    credential a job was created with has been deleted since."""

    reason = Reason.CREDENTIAL_NOT_FOUND


class ScheduleNotFound(JobsError):
    """No such schedule for this user (another user's is not found either)."""

    reason = Reason.SCHEDULE_NOT_FOUND


class CredentialUnavailable(JobsError):
    """User credentials cannot be used here: none is configured for the job, or this
    deployment has no master key to seal or open them with."""

    reason = Reason.CREDENTIAL_UNAVAILABLE


class JobNotCancellable(JobsError):
    reason = Reason.JOB_NOT_CANCELLABLE


class JobAlreadyCancelled(JobsError):
    reason = Reason.JOB_ALREADY_CANCELLED


class JobNotRetryable(JobsError):
    reason = Reason.JOB_NOT_RETRYABLE


class LiveChildExists(JobsError):
    """RetryJob of a child whose parent already has a child of that type that is
    unfinished or succeeded (a newer retry, say): one live child per parent and type."""

    reason = Reason.LIVE_CHILD_EXISTS


class LiveRetryExists(JobsError):
    """RetryJob of a job whose original (the first job of its retry lineage) already has
    a retry that is waiting, running or succeeded, or that the same RetryJobs walk made:
    one live retry per original."""

    reason = Reason.LIVE_RETRY_EXISTS


class IdempotencyKeyReused(JobsError):
    reason = Reason.IDEMPOTENCY_KEY_REUSED


class JobFinished(JobsError):
    """The job has finished: it can no longer receive signals."""

    reason = Reason.JOB_FINISHED


class TooManyJobs(JobsError):
    """The user has as many unfinished jobs as allowed."""

    reason = Reason.TOO_MANY_JOBS


class QuotaExceeded(JobsError):
    """The user created as many jobs today (UTC) as allowed, or spent the daily cost
    budget (ErrorInfo metadata ``quota``: ``daily_jobs`` or ``daily_cost_budget``)."""

    reason = Reason.QUOTA_EXCEEDED


class SignalLimitReached(JobsError):
    """The job holds as many signals as one job may (JOBS_MAX_SIGNALS_PER_JOB); it takes
    no more. No RetryInfo: waiting does not help, since signals leave only with their job."""

    reason = Reason.SIGNAL_LIMIT_REACHED


class Unauthenticated(JobsError):
    reason = Reason.UNAUTHENTICATED


class PermissionDenied(JobsError):
    reason = Reason.PERMISSION_DENIED


class LeaseLost(JobsError):
    reason = Reason.LEASE_LOST


class PlatformUnavailable(JobsError):
    reason = Reason.PLATFORM_UNAVAILABLE


class InternalError(JobsError):
    reason = Reason.INTERNAL


# --- why an attempt failed -------------------------------------------------------------


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


# Engine codes whose prefix does not name their class.
_CLASS_OF = {
    ErrorCode.WORKER_DISCONNECTED.value: ErrorClass.LEASE,
    ErrorCode.DEPENDENCY_FAILED.value: ErrorClass.JOB,
    ErrorCode.DEPENDENCY_CANCELLED.value: ErrorClass.CANCELLED,
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
}


def public_message(code: str) -> str:
    return PUBLIC_MESSAGES[classify(code)]


@dataclass
class ExecutionError(JobsError):
    """Raised by job code inside a worker to fail the attempt with a chosen code.

    ``detail`` is internal: it reaches operators, never the job's owner. As a
    ``JobsError`` its ``message`` is the public message of the code's class; it is not an
    API error, and no call answers with one."""

    code: str
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    # The earliest a retry makes sense (a provider's Retry-After), in seconds.
    retry_after_s: float | None = None

    def __post_init__(self) -> None:
        self.message = public_message(self.code)
        self.violations = []

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code
