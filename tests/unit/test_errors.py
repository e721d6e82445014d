"""Error classes (DESIGN §7) and the gRPC status translation (DESIGN §8), both ways."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from job_service.adapters.grpc.errors import _translate
from shared import errors
from shared.errors import (
    PUBLIC_MESSAGES,
    ErrorClass,
    ErrorCode,
    ExecutionError,
    FieldViolation,
    JobsError,
    Reason,
    classify,
    public_message,
)
from shared.rpc_errors import domain_of, error_from_rpc, grpc_code, status_for
from tests.support.fakes import FakeRpcError

DOMAIN = "jobs.v1.JobService"

DETAILS_KEY = "grpc-status-details-bin"

# --- classify --------------------------------------------------------------------------

# Written out independently: every code the engine produces, and its class.
ENGINE_CODES = {
    "PROVIDER_TIMEOUT": ErrorClass.PROVIDER,
    "PROVIDER_UNAVAILABLE": ErrorClass.PROVIDER,
    "PROVIDER_RATE_LIMITED": ErrorClass.PROVIDER,
    "PROVIDER_REQUEST_REJECTED": ErrorClass.PROVIDER,
    "VALIDATION_OUTPUT_SCHEMA": ErrorClass.VALIDATION,
    "VALIDATION_OUTPUT_MALFORMED": ErrorClass.VALIDATION,
    "VALIDATION_OUTPUT_REJECTED": ErrorClass.VALIDATION,
    "CONTENT_SAFETY_BLOCKED": ErrorClass.CONTENT_SAFETY,
    "TIMEOUT": ErrorClass.TIMEOUT,
    "CREDENTIAL_INVALID": ErrorClass.CREDENTIAL,
    "CREDENTIAL_FORBIDDEN": ErrorClass.CREDENTIAL,
    "CANCELLED": ErrorClass.CANCELLED,
    "INTERNAL_ERROR": ErrorClass.INTERNAL,
    "INTERNAL_PROJECTION_REFUSED": ErrorClass.INTERNAL,
    "JOB_REJECTED": ErrorClass.JOB,
    "LEASE_EXPIRED": ErrorClass.LEASE,
    "WORKER_SHUTDOWN": ErrorClass.WORKER_SHUTDOWN,
    "WORKER_DISCONNECTED": ErrorClass.LEASE,
    "CREDENTIAL_UNAVAILABLE": ErrorClass.CREDENTIAL,
    "DEPENDENCY_FAILED": ErrorClass.JOB,
    "DEPENDENCY_CANCELLED": ErrorClass.CANCELLED,
    "NONDETERMINISTIC": ErrorClass.JOB,
    "SUSPENDED_SLEEP": ErrorClass.SUSPENDED,
    "SUSPENDED_SIGNAL": ErrorClass.SUSPENDED,
    "DEADLINE_EXCEEDED": ErrorClass.DEADLINE,
}


def test_every_engine_code_is_listed() -> None:
    assert {c.value for c in ErrorCode} == set(ENGINE_CODES)


@pytest.mark.parametrize(("code", "error_class"), sorted(ENGINE_CODES.items()))
def test_engine_codes_classify(code: str, error_class: ErrorClass) -> None:
    assert classify(code) is error_class
    assert classify(ErrorCode(code)) is error_class


@pytest.mark.parametrize(
    ("code", "error_class"),
    [
        # A job type's own codes: the prefix names the class.
        ("PROVIDER_HTTP_502", ErrorClass.PROVIDER),
        ("VALIDATION_CARD_COUNT", ErrorClass.VALIDATION),
        ("CONTENT_SAFETY_PII", ErrorClass.CONTENT_SAFETY),
        ("TIMEOUT_HARD", ErrorClass.TIMEOUT),
        ("CREDENTIAL_MISSING", ErrorClass.CREDENTIAL),
        ("CANCELLED_BY_PARENT", ErrorClass.CANCELLED),
        ("INTERNAL_BUG", ErrorClass.INTERNAL),
        ("JOB_INPUT_TOO_SHORT", ErrorClass.JOB),
        ("LEASE_LOST", ErrorClass.LEASE),
        # A class name inside another code does not count; only the leading prefix does.
        ("PROVIDER_CONTENT_SAFETY", ErrorClass.PROVIDER),
        ("JOB_TIMEOUT", ErrorClass.JOB),
    ],
)
def test_prefixes_classify(code: str, error_class: ErrorClass) -> None:
    assert classify(code) is error_class


@pytest.mark.parametrize(
    "code",
    [
        "",
        "UNKNOWN",
        "provider_timeout",  # case matters
        "PROVIDERX",  # a prefix counts only with its "_"
        "TIMEOUTS",
        "JOBS_FAILED",
        "WORKER",
        "CONTENT_SAFE",
        "_PROVIDER_TIMEOUT",
        " PROVIDER_TIMEOUT",
    ],
)
def test_unknown_codes_count_as_internal(code: str) -> None:
    assert classify(code) is ErrorClass.INTERNAL


@settings(database=None, max_examples=300)
@given(code=st.text())
def test_classify_is_total_and_prefix_driven(code: str) -> None:
    found = classify(code)
    if code in ENGINE_CODES:  # four of them are classed otherwise than by their prefix
        assert found is ENGINE_CODES[code]
        return
    matching = [c for c in ErrorClass if code == c.value or code.startswith(c.value + "_")]
    if matching:
        assert found in matching
    else:
        assert found is ErrorClass.INTERNAL


# --- public messages -------------------------------------------------------------------


def test_every_class_has_a_public_message() -> None:
    assert set(PUBLIC_MESSAGES) == set(ErrorClass)
    assert all(message.strip() for message in PUBLIC_MESSAGES.values())
    assert len(set(PUBLIC_MESSAGES.values())) == len(ErrorClass)


@pytest.mark.parametrize("code", sorted(ENGINE_CODES))
def test_public_message_is_the_message_of_the_class(code: str) -> None:
    assert public_message(code) == PUBLIC_MESSAGES[ENGINE_CODES[code]]


def test_public_message_never_echoes_the_internal_detail() -> None:
    failure = ExecutionError(
        "PROVIDER_HTTP_500",
        "POST https://api.example/v1 key=sk-live-abc123 body={'answer': 'my secret essay'}",
        extra={"status": "500"},
    )
    shown = public_message(failure.code)
    assert "sk-live-abc123" not in shown
    assert "secret essay" not in shown
    assert "api.example" not in shown
    assert "HTTP_500" not in shown
    assert shown == PUBLIC_MESSAGES[ErrorClass.PROVIDER]
    # The detail is for operators: it is in str(error), the public message is not.
    assert "sk-live-abc123" in str(failure)


@settings(database=None, max_examples=300)
@given(code=st.text(), detail=st.text(min_size=8))
def test_public_message_is_always_one_of_the_fixed_texts(code: str, detail: str) -> None:
    shown = public_message(code)
    assert shown in PUBLIC_MESSAGES.values()
    failure = ExecutionError(code, detail)
    assert public_message(failure.code) == shown
    if detail not in "".join(PUBLIC_MESSAGES.values()):
        assert detail not in shown


def test_execution_error_str() -> None:
    assert str(ExecutionError("TIMEOUT")) == "TIMEOUT"
    assert str(ExecutionError("JOB_REJECTED", "too short")) == "JOB_REJECTED: too short"


def test_execution_error_is_a_jobs_error_with_the_public_message() -> None:
    failure = ExecutionError("PROVIDER_HTTP_500", "key=sk-live-abc123", retry_after_s=2.0)
    assert isinstance(failure, JobsError)
    assert failure.message == PUBLIC_MESSAGES[ErrorClass.PROVIDER]
    assert "sk-live-abc123" not in failure.message
    assert failure.violations == []
    assert failure.retry_after_s == 2.0


def test_an_execution_error_answers_no_call() -> None:
    """Raised in the job service, it would be a bug: INTERNAL with a request id."""
    answered = _translate(ExecutionError("JOB_REJECTED", "secret detail"), "/jobs.v1.X/Y")
    assert type(answered) is errors.InternalError
    assert "request id" in answered.message
    assert "secret" not in answered.message


# --- the tree in the module docstring ----------------------------------------------------

PACKAGES = ("shared", "job_service", "worker_service", "jobctl")


def _exception_classes() -> dict[str, str]:
    """Every exception class the product defines, by name, with the file it is in: a class
    whose base is named ...Error or ...Exception, or is such a class itself."""
    root = Path(__file__).resolve().parents[2]
    classes: dict[str, tuple[str, list[str]]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "pb" in path.relative_to(root).parts[1:2]:
                continue  # generated protobuf code
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                    classes[node.name] = (str(path.relative_to(root)), bases)
    found: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name, (where, bases) in classes.items():
            if name not in found and any(
                b.endswith(("Error", "Exception")) or b in found for b in bases
            ):
                found[name] = where
                changed = True
    return found


def test_the_module_docstring_draws_every_exception_class() -> None:
    drawn = set(re.findall(r"\b[A-Z]\w+\b", errors.__doc__ or ""))
    missing = {name: where for name, where in _exception_classes().items() if name not in drawn}
    assert not missing, f"draw these in the shared.errors docstring: {missing}"


# --- status_for ------------------------------------------------------------------------

EXPECTED_CODES = {
    errors.InvalidInput: (Reason.INVALID_INPUT, grpc.StatusCode.INVALID_ARGUMENT),
    errors.UnknownJobType: (Reason.UNKNOWN_JOB_TYPE, grpc.StatusCode.NOT_FOUND),
    errors.JobNotFound: (Reason.JOB_NOT_FOUND, grpc.StatusCode.NOT_FOUND),
    errors.CredentialNotFound: (Reason.CREDENTIAL_NOT_FOUND, grpc.StatusCode.NOT_FOUND),
    errors.ScheduleNotFound: (Reason.SCHEDULE_NOT_FOUND, grpc.StatusCode.NOT_FOUND),
    errors.CredentialUnavailable: (
        Reason.CREDENTIAL_UNAVAILABLE,
        grpc.StatusCode.FAILED_PRECONDITION,
    ),
    errors.JobNotCancellable: (Reason.JOB_NOT_CANCELLABLE, grpc.StatusCode.FAILED_PRECONDITION),
    errors.JobFinished: (Reason.JOB_FINISHED, grpc.StatusCode.FAILED_PRECONDITION),
    errors.UserHasRunningJobs: (
        Reason.USER_HAS_RUNNING_JOBS,
        grpc.StatusCode.FAILED_PRECONDITION,
    ),
    errors.JobAlreadyCancelled: (
        Reason.JOB_ALREADY_CANCELLED,
        grpc.StatusCode.FAILED_PRECONDITION,
    ),
    errors.IdempotencyKeyReused: (
        Reason.IDEMPOTENCY_KEY_REUSED,
        grpc.StatusCode.FAILED_PRECONDITION,
    ),
    errors.JobNotRetryable: (Reason.JOB_NOT_RETRYABLE, grpc.StatusCode.FAILED_PRECONDITION),
    errors.LiveChildExists: (Reason.LIVE_CHILD_EXISTS, grpc.StatusCode.FAILED_PRECONDITION),
    errors.LiveRetryExists: (Reason.LIVE_RETRY_EXISTS, grpc.StatusCode.FAILED_PRECONDITION),
    errors.TooManyJobs: (Reason.TOO_MANY_JOBS, grpc.StatusCode.RESOURCE_EXHAUSTED),
    errors.QuotaExceeded: (Reason.QUOTA_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED),
    errors.SignalLimitReached: (Reason.SIGNAL_LIMIT_REACHED, grpc.StatusCode.RESOURCE_EXHAUSTED),
    errors.LeaseLost: (Reason.LEASE_LOST, grpc.StatusCode.ABORTED),
    errors.JobTypeSpecConflict: (
        Reason.JOB_TYPE_SPEC_CONFLICT,
        grpc.StatusCode.FAILED_PRECONDITION,
    ),
    errors.Unauthenticated: (Reason.UNAUTHENTICATED, grpc.StatusCode.UNAUTHENTICATED),
    errors.PermissionDenied: (Reason.PERMISSION_DENIED, grpc.StatusCode.PERMISSION_DENIED),
    errors.PlatformUnavailable: (Reason.PLATFORM_UNAVAILABLE, grpc.StatusCode.UNAVAILABLE),
    errors.InternalError: (Reason.INTERNAL, grpc.StatusCode.INTERNAL),
}
ERROR_CLASSES = list(EXPECTED_CODES)
VIOLATIONS = [
    FieldViolation("input.sleep_ms", "Input should be greater than or equal to 0"),
    FieldViolation("input.fail", "Input should be 'none', 'retryable', 'fatal' or 'hang'"),
]


def test_every_reason_has_an_error_class() -> None:
    assert {reason for reason, _ in EXPECTED_CODES.values()} == set(Reason)


def _rich(status: grpc.Status) -> status_pb2.Status:
    [(key, value)] = status.trailing_metadata
    assert key == DETAILS_KEY
    return status_pb2.Status.FromString(value)


def _details(rich: status_pb2.Status) -> tuple[list[error_details_pb2.ErrorInfo], list[object]]:
    infos, bad_requests = [], []
    for detail in rich.details:
        info, bad = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
        if detail.Is(info.DESCRIPTOR):
            detail.Unpack(info)
            infos.append(info)
        elif detail.Is(bad.DESCRIPTOR):
            detail.Unpack(bad)
            bad_requests.append(bad)
        else:
            raise AssertionError(f"unexpected detail {detail.type_url}")
    return infos, bad_requests


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_status_for_carries_exactly_one_error_info(cls: type[JobsError]) -> None:
    reason, code = EXPECTED_CODES[cls]
    status = status_for(cls("the job is gone"), DOMAIN)
    assert status.code is code
    assert grpc_code(reason) is code
    assert status.details == "the job is gone"
    rich = _rich(status)
    assert rich.code == code.value[0] == getattr(code_pb2, code.name)
    assert rich.message == "the job is gone"
    infos, bad_requests = _details(rich)
    assert len(infos) == 1
    assert infos[0].reason == reason.value
    assert infos[0].domain == DOMAIN
    assert dict(infos[0].metadata) == {}
    assert bad_requests == []


def test_status_for_adds_field_violations_as_bad_request() -> None:
    status = status_for(errors.InvalidInput("input does not match", VIOLATIONS), DOMAIN)
    assert status.code is grpc.StatusCode.INVALID_ARGUMENT
    infos, bad_requests = _details(_rich(status))
    assert [i.reason for i in infos] == ["INVALID_INPUT"]
    [bad] = bad_requests
    assert [(v.field, v.description) for v in bad.field_violations] == [
        (v.field, v.description) for v in VIOLATIONS
    ]
    assert infos[0].metadata["field"] == ",".join(dict.fromkeys(v.field for v in VIOLATIONS))


def test_resource_exhausted_carries_retry_info_and_round_trips() -> None:
    status = status_for(errors.TooManyJobs("too many unfinished jobs", retry_after_s=2.5), DOMAIN)
    assert status.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    rich = _rich(status)
    kinds = [d.type_url.rsplit(".", 1)[-1] for d in rich.details]
    assert kinds == ["ErrorInfo", "RetryInfo"]
    retry = error_details_pb2.RetryInfo()
    rich.details[1].Unpack(retry)
    assert retry.retry_delay.ToTimedelta().total_seconds() == 2.5
    back = error_from_rpc(FakeRpcError.of(status))
    assert type(back) is errors.TooManyJobs
    assert back.retry_after_s == 2.5


def test_status_for_passes_error_info_metadata() -> None:
    status = status_for(errors.LeaseLost("lease lost"), DOMAIN, {"job_id": "j1"})
    [info], _ = _details(_rich(status))
    assert dict(info.metadata) == {"job_id": "j1"}


def test_the_errors_own_ids_win_over_the_requests() -> None:
    error = errors.IdempotencyKeyReused("reused", metadata={"job_id": "existing"})
    [info], _ = _details(_rich(status_for(error, DOMAIN, {"job_id": "asked"})))
    assert dict(info.metadata) == {"job_id": "existing"}
    back = error_from_rpc(FakeRpcError.of(status_for(error, DOMAIN)))
    assert back is not None and back.metadata == {"job_id": "existing"}


@pytest.mark.parametrize(
    ("method", "domain"),
    [
        ("/jobs.v1.JobService/CreateJob", "jobs.v1.JobService"),
        ("/jobs.v1.AdminService/GetJob", "jobs.v1.AdminService"),
        ("/jobs.v1.ExecutorService/SubmitResults", "jobs.v1.ExecutorService"),
        ("/grpc.health.v1.Health/Check", "jobs.v1"),
    ],
)
def test_the_domain_is_the_service_called(method: str, domain: str) -> None:
    assert domain_of(method) == domain


# --- error_from_rpc --------------------------------------------------------------------


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("violations", [[], VIOLATIONS], ids=["plain", "violations"])
def test_error_from_rpc_round_trips_status_for(
    cls: type[JobsError], violations: list[FieldViolation]
) -> None:
    original = cls("something went wrong: ünïcode", violations)
    back = error_from_rpc(FakeRpcError.of(status_for(original, DOMAIN)))
    assert back is not None
    assert type(back) is cls
    assert back.reason is original.reason
    assert back.message == original.message
    assert back.violations == violations


def test_error_from_rpc_keeps_the_subclass_for_unknown_job_type() -> None:
    original = errors.UnknownJobType(
        "unknown job type 'x'", [FieldViolation("job_type", "is not a registered job type")]
    )
    back = error_from_rpc(FakeRpcError.of(status_for(original, DOMAIN)))
    assert type(back) is errors.UnknownJobType
    assert back.violations == original.violations


def test_error_from_rpc_without_trailing_metadata_is_none() -> None:
    assert error_from_rpc(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "refused", None)) is None
    assert error_from_rpc(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "refused", ())) is None
    unrelated = (("x-other", b"1"),)
    assert error_from_rpc(FakeRpcError(grpc.StatusCode.INTERNAL, "boom", unrelated)) is None


def _raw_status(code: grpc.StatusCode, message: str, *details: object) -> FakeRpcError:
    rich = status_pb2.Status(code=code.value[0], message=message)
    for detail in details:
        rich.details.add().Pack(detail)
    return FakeRpcError(code, message, ((DETAILS_KEY, rich.SerializeToString()),))


def test_error_from_rpc_without_error_info_is_none() -> None:
    bad = error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field="x")]
    )
    assert error_from_rpc(_raw_status(grpc.StatusCode.INVALID_ARGUMENT, "bad", bad)) is None


def test_error_from_rpc_with_an_unknown_reason_is_internal() -> None:
    info = error_details_pb2.ErrorInfo(reason="SOMETHING_NEW", domain=DOMAIN)
    back = error_from_rpc(_raw_status(grpc.StatusCode.FAILED_PRECONDITION, "new", info))
    assert type(back) is errors.InternalError
    assert back.message == "new"
