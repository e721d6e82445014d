"""The one translation point between ``JobsError`` and gRPC status, both ways.

Server side: ``status_for`` turns an error into a ``google.rpc.Status`` with exactly one
``ErrorInfo`` (and ``BadRequest`` field violations for bad input, ``RetryInfo`` when
waiting helps); the job service's interceptor aborts the call with it, and batch RPCs put
it in a refused item's answer (``status_proto_for``). Client side: ``error_from_rpc``
turns a failed call back into the matching ``JobsError`` subclass, ``error_from_status`` a
refused batch item.

The ErrorInfo's ``domain`` is the full name of the gRPC service that answered, e.g.
"jobs.v1.JobService" (``domain_of``): the name a caller already used to make the call, and
unique without a DNS name of our own. ``(domain, reason)`` identifies an error. Its
``metadata`` names what is involved: ``job_id`` (the job the request named, or the one
the error is about) and ``field`` (the request fields the BadRequest violations name,
comma-separated).
"""

from __future__ import annotations

from datetime import timedelta

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from shared import errors
from shared.errors import FieldViolation, JobsError, Reason

PACKAGE = "jobs.v1"

_CODES: dict[Reason, grpc.StatusCode] = {
    Reason.INVALID_INPUT: grpc.StatusCode.INVALID_ARGUMENT,
    Reason.UNKNOWN_JOB_TYPE: grpc.StatusCode.NOT_FOUND,
    Reason.JOB_TYPE_SPEC_CONFLICT: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.JOB_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.CREDENTIAL_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.SCHEDULE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.CREDENTIAL_UNAVAILABLE: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.JOB_NOT_CANCELLABLE: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.JOB_ALREADY_CANCELLED: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.JOB_NOT_RETRYABLE: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.LIVE_CHILD_EXISTS: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.LIVE_RETRY_EXISTS: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.IDEMPOTENCY_KEY_REUSED: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.JOB_FINISHED: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.USER_HAS_RUNNING_JOBS: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.TOO_MANY_JOBS: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.QUOTA_EXCEEDED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.SIGNAL_LIMIT_REACHED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.LEASE_LOST: grpc.StatusCode.ABORTED,
    Reason.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Reason.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Reason.PLATFORM_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Reason.INTERNAL: grpc.StatusCode.INTERNAL,
}

_CLASSES: dict[Reason, type[JobsError]] = {
    cls.reason: cls
    for cls in (
        errors.InvalidInput,
        errors.UnknownJobType,
        errors.JobNotFound,
        errors.CredentialNotFound,
        errors.ScheduleNotFound,
        errors.CredentialUnavailable,
        errors.JobNotCancellable,
        errors.JobAlreadyCancelled,
        errors.JobNotRetryable,
        errors.LiveChildExists,
        errors.LiveRetryExists,
        errors.IdempotencyKeyReused,
        errors.JobFinished,
        errors.UserHasRunningJobs,
        errors.JobTypeSpecConflict,
        errors.TooManyJobs,
        errors.QuotaExceeded,
        errors.SignalLimitReached,
        errors.LeaseLost,
        errors.Unauthenticated,
        errors.PermissionDenied,
        errors.PlatformUnavailable,
        errors.InternalError,
    )
}


def grpc_code(reason: Reason) -> grpc.StatusCode:
    return _CODES[reason]


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


def domain_of(method: str) -> str:
    """The ErrorInfo domain of a call to ``method`` ("/jobs.v1.JobService/CreateJob"):
    its service's full name; the package for a method that names none."""
    service = method.lstrip("/").split("/", 1)[0]
    return service if service.startswith(PACKAGE + ".") else PACKAGE


def status_for(
    error: JobsError, domain: str, metadata: dict[str, str] | None = None
) -> grpc.Status:
    """The status a call to a service of ``domain`` that failed with ``error`` ends with."""
    return rpc_status.to_status(status_proto_for(error, domain, metadata))


def status_proto_for(
    error: JobsError, domain: str, metadata: dict[str, str] | None = None
) -> status_pb2.Status:
    """``error`` as a ``google.rpc.Status`` message: what a failed call carries, and what
    a batch RPC answers for one refused item. ``metadata`` (e.g. the request's job_id) is
    merged under the error's own."""
    code = _CODES[error.reason]
    info = {**(metadata or {}), **error.metadata}
    if error.violations:
        info["field"] = ",".join(dict.fromkeys(v.field for v in error.violations))
    details = [
        _pack(error_details_pb2.ErrorInfo(reason=error.reason.value, domain=domain, metadata=info))
    ]
    if error.violations:
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=v.field, description=v.description
                        )
                        for v in error.violations
                    ]
                )
            )
        )
    if error.retry_after_s is not None:
        delay = duration_pb2.Duration()
        delay.FromTimedelta(timedelta(seconds=max(0.0, error.retry_after_s)))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    return status_pb2.Status(
        code=getattr(code_pb2, code.name), message=error.message, details=details
    )


def error_from_rpc(exc: grpc.aio.AioRpcError | grpc.RpcError) -> JobsError | None:
    """The JobsError a failed call carries, or None when it carries no ErrorInfo
    (transport failures such as UNAVAILABLE from a connection refused)."""
    status = rpc_status.from_call(exc)
    return None if status is None else error_from_status(status)


def error_from_status(status: status_pb2.Status) -> JobsError | None:
    """The JobsError a ``google.rpc.Status`` stands for, or None without an ErrorInfo."""
    reason: Reason | None = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    retry_after_s: float | None = None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        bad = error_details_pb2.BadRequest()
        retry = error_details_pb2.RetryInfo()
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
            try:
                reason = Reason(info.reason)
            except ValueError:
                reason = Reason.INTERNAL
            metadata = dict(info.metadata)
        elif detail.Is(bad.DESCRIPTOR) and detail.Unpack(bad):
            violations = [FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(retry.DESCRIPTOR) and detail.Unpack(retry):
            retry_after_s = retry.retry_delay.ToTimedelta().total_seconds()
    if reason is None:
        return None
    return _CLASSES[reason](status.message, violations, retry_after_s, metadata=metadata)
