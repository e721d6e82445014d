"""One exception per reason the job service gives (its ``google.rpc.ErrorInfo``), with
the field violations of bad input and the wait ``RetryInfo`` asks for::

    JobsError                     (reason, message, violations, retry_after, code)
    ├── InvalidInput              INVALID_INPUT
    │   └── UnknownJobType        UNKNOWN_JOB_TYPE
    ├── JobNotFound               JOB_NOT_FOUND
    ├── ScheduleNotFound          SCHEDULE_NOT_FOUND
    ├── CredentialNotFound        CREDENTIAL_NOT_FOUND
    ├── CredentialUnavailable     CREDENTIAL_UNAVAILABLE
    ├── JobNotCancellable         JOB_NOT_CANCELLABLE
    ├── JobAlreadyCancelled       JOB_ALREADY_CANCELLED
    ├── JobNotRetryable           JOB_NOT_RETRYABLE
    ├── LiveChildExists           LIVE_CHILD_EXISTS (a retried child: its parent has a live one)
    ├── LiveRetryExists           LIVE_RETRY_EXISTS (a retried job: its original has a live retry)
    ├── JobFinished               JOB_FINISHED      (a signal sent to a finished job)
    ├── UserHasRunningJobs        USER_HAS_RUNNING_JOBS (EraseUserData: unfinished jobs)
    ├── IdempotencyKeyReused      IDEMPOTENCY_KEY_REUSED
    ├── TooManyJobs               TOO_MANY_JOBS     (retry_after)
    ├── QuotaExceeded             QUOTA_EXCEEDED    (retry_after)
    ├── SignalLimitReached        SIGNAL_LIMIT_REACHED (the job holds its most signals)
    ├── Unauthenticated           UNAUTHENTICATED
    ├── PermissionDenied          PERMISSION_DENIED
    ├── Unavailable               PLATFORM_UNAVAILABLE, or no answer at all (transport)
    ├── DeadlineExceeded          the call's deadline passed
    └── InternalError             INTERNAL, and any reason this client does not know
    ConfigError (ValueError)      TLS or auth settings incomplete or unreadable

Every reason the engine answers a caller with has its class here; the ones left out,
LEASE_LOST and JOB_TYPE_SPEC_CONFLICT, only ExecutorService answers (to workers, never to
this client). UnknownJobType comes with NOT_FOUND (no worker declared the type). A unit test
(tests/unit/test_error_parity.py) holds the tree to the engine's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


class ConfigError(ValueError):
    """The client's TLS or auth settings are incomplete or unreadable."""


class JobsError(Exception):
    """A call the job service refused (or that could not reach it)."""

    reason = "INTERNAL"

    def __init__(
        self,
        message: str,
        violations: list[FieldViolation] | None = None,
        retry_after: float | None = None,
        code: grpc.StatusCode | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.violations = violations or []
        self.retry_after = retry_after
        self.code = code

    def __str__(self) -> str:
        fields = "; ".join(f"{v.field}: {v.description}" for v in self.violations)
        return f"{self.message} ({fields})" if fields else self.message


class InvalidInput(JobsError):
    reason = "INVALID_INPUT"


class UnknownJobType(InvalidInput):
    reason = "UNKNOWN_JOB_TYPE"


class JobNotFound(JobsError):
    reason = "JOB_NOT_FOUND"


class ScheduleNotFound(JobsError):
    reason = "SCHEDULE_NOT_FOUND"


class CredentialNotFound(JobsError):
    reason = "CREDENTIAL_NOT_FOUND"


class CredentialUnavailable(JobsError):
    reason = "CREDENTIAL_UNAVAILABLE"


class JobNotCancellable(JobsError):
    reason = "JOB_NOT_CANCELLABLE"


class JobAlreadyCancelled(JobsError):
    reason = "JOB_ALREADY_CANCELLED"


class JobNotRetryable(JobsError):
    reason = "JOB_NOT_RETRYABLE"


class LiveChildExists(JobsError):
    """RetryJob of a child whose parent already has an unfinished or succeeded child of
    its type: one live child per parent and type."""

    reason = "LIVE_CHILD_EXISTS"


class LiveRetryExists(JobsError):
    """RetryJob of a job whose original already has a waiting, running or succeeded
    retry: one live retry per original."""

    reason = "LIVE_RETRY_EXISTS"


class JobFinished(JobsError):
    reason = "JOB_FINISHED"


class UserHasRunningJobs(JobsError):
    """EraseUserData while the user has unfinished jobs; nothing was erased."""

    reason = "USER_HAS_RUNNING_JOBS"


class IdempotencyKeyReused(JobsError):
    reason = "IDEMPOTENCY_KEY_REUSED"


class TooManyJobs(JobsError):
    reason = "TOO_MANY_JOBS"


class QuotaExceeded(JobsError):
    reason = "QUOTA_EXCEEDED"


class SignalLimitReached(JobsError):
    reason = "SIGNAL_LIMIT_REACHED"


class Unauthenticated(JobsError):
    reason = "UNAUTHENTICATED"


class PermissionDenied(JobsError):
    reason = "PERMISSION_DENIED"


class Unavailable(JobsError):
    reason = "PLATFORM_UNAVAILABLE"


class DeadlineExceeded(JobsError):
    reason = "DEADLINE_EXCEEDED"


class InternalError(JobsError):
    reason = "INTERNAL"


_BY_REASON: dict[str, type[JobsError]] = {
    cls.reason: cls
    for cls in (
        InvalidInput,
        UnknownJobType,
        JobNotFound,
        ScheduleNotFound,
        CredentialNotFound,
        CredentialUnavailable,
        JobNotCancellable,
        JobAlreadyCancelled,
        JobNotRetryable,
        LiveChildExists,
        LiveRetryExists,
        JobFinished,
        UserHasRunningJobs,
        IdempotencyKeyReused,
        TooManyJobs,
        QuotaExceeded,
        SignalLimitReached,
        Unauthenticated,
        PermissionDenied,
        Unavailable,
        InternalError,
    )
}
_BY_CODE: dict[grpc.StatusCode, type[JobsError]] = {
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.NOT_FOUND: JobNotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidInput,
}


def error_from_status(status: status_pb2.Status, code: grpc.StatusCode | None = None) -> JobsError:
    """The exception a ``google.rpc.Status`` stands for (a failed call, or a refused item
    of CreateJobs)."""
    reason = ""
    violations: list[FieldViolation] = []
    retry_after: float | None = None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        bad = error_details_pb2.BadRequest()
        retry = error_details_pb2.RetryInfo()
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
            reason = info.reason
        elif detail.Is(bad.DESCRIPTOR) and detail.Unpack(bad):
            violations = [FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(retry.DESCRIPTOR) and detail.Unpack(retry):
            retry_after = retry.retry_delay.ToTimedelta().total_seconds()
    if code is None:
        code = _CODE_NUMBERS.get(status.code)
    cls = _BY_REASON.get(reason) or (_BY_CODE.get(code) if code else None) or InternalError
    error = cls(status.message, violations, retry_after, code)
    if reason:  # the service's own word, also for reasons without a class of their own
        error.reason = reason
    return error


_CODE_NUMBERS = {c.value[0]: c for c in grpc.StatusCode}


def error_from_rpc(error: grpc.RpcError) -> JobsError:
    """The exception a failed call stands for; transport failures (no ErrorInfo) by their
    status code."""
    call: Any = error
    code: grpc.StatusCode = call.code()
    status = status_pb2.Status(code=code.value[0], message=call.details() or "")
    for key, value in call.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            break
    return error_from_status(status, code)
