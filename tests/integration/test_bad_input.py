"""Bad input changes nothing: every request type, sent malformed, is refused with its
documented code and reason (exactly one ErrorInfo), and every table keeps its row count.

The table below is the contract; docs/api.md ("The API", its error table) documents the
same codes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from job_service.domain.checks import MAX_INPUT_BYTES
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import usage_service_pb2 as upb
from shared.pbconv import struct_from_dict
from tests.support.ai import FEYNMAN_INPUT
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import (
    ALL_ROLES_TOKEN,
    CLIENT_TOKEN,
    WORKER_TOKEN,
    count_rows,
    open_channel,
    result_request,
)

__all__ = ["shared_stack"]  # the module's stack, used as a fixture

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"
SQL = "x'; DROP TABLE jobs; --"
SHELL = "$(rm -rf /); `reboot` | cat /etc/passwd &"
CONTROL = "al\x00ice\n\x1b[31m"
LONG = "u" * 256


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"k": value}
    return value


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, encoded by hand."""
    key, length = (number << 3) | 2, len(payload)
    varint = bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes([key]) + bytes(varint) + payload


def _deep_create(depth: int) -> bytes:
    """A CreateJobRequest whose input nests deeper than protobuf's own parse limit (no
    protobuf library builds one, so it is encoded by hand)."""
    struct = b""
    for _ in range(depth):
        value = _field(5, struct)  # Value.struct_value
        struct = _field(1, _field(1, b"k") + _field(2, value))  # Struct.fields["k"]
    return _field(1, b"alice") + _field(2, b"synthetic") + _field(3, struct)


@dataclass(frozen=True)
class Case:
    method: str  # "/jobs.v1.JobService/CreateJob"
    request: Callable[[SharedStack], Message | bytes]
    code: grpc.StatusCode
    reason: str
    token: str = ALL_ROLES_TOKEN
    stream: bool = False


def submit_and_grant(
    s: SharedStack, wanted: epb.QueueSlots, worker_id: str = "w", runnable: list[str] | None = None
) -> epb.SubmitResultsRequest:
    """A valid result of the running job asking for ``wanted`` jobs with its answer."""
    return epb.SubmitResultsRequest(
        requests=[result_request(s.running, s.lease_token, {"attempt": 1, "data": "x"})],
        next_grants=[wanted],
        worker_id=worker_id,
        runnable_definitions=runnable or [],
    )


def step(s: SharedStack, **fields: Any) -> epb.RecordStepRequest:
    """A RecordStep for the running job under its lease, ``fields`` changed."""
    values = {
        "job_id": s.running,
        "lease_token": s.lease_token,
        "step": "evaluate",
        "text": '{"a": 1}',
        "parsed_json": '{"a": 1}',
        "call_id": "c-step",
        "error_code": "",
        **fields,
    }
    return epb.RecordStepRequest(
        job_id=values["job_id"],
        lease_token=values["lease_token"],
        step=values["step"],
        response=epb.StepResponse(
            text=values["text"], parsed_json=values["parsed_json"], model="m", provider="fake"
        ),
        usage=epb.ProviderUsage(
            provider="fake",
            model="m",
            call_id=values["call_id"],
            error_code=values["error_code"],
        ),
    )


def create(**fields: Any) -> Callable[[SharedStack], Message]:
    fields.setdefault("user_id", "alice")
    fields.setdefault("job_type", "synthetic")
    raw_input = fields.pop("input", {})
    message = struct_from_dict(raw_input)
    return lambda s: jpb.CreateJobRequest(input=message, **fields)


def signal(job_id: str, **fields: Any) -> jpb.SendSignalRequest:
    fields.setdefault("user_id", "alice")
    fields.setdefault("name", "approve")
    payload = struct_from_dict(fields.pop("payload", {}))
    return jpb.SendSignalRequest(job_id=job_id, payload=payload, **fields)


NOW = int(time.time())
JOB = "/jobs.v1.JobService/"
ADMIN = "/jobs.v1.AdminService/"
EXEC = "/jobs.v1.ExecutorService/"
CRED = "/jobs.v1.CredentialService/"
USAGE = "/jobs.v1.UsageService/GetUsage"
MIDNIGHT = NOW - NOW % 86_400


def usage(
    start: int | None = MIDNIGHT - 7 * 86_400, end: int | None = MIDNIGHT, **fields: Any
) -> Callable[[SharedStack], Message]:
    """A GetUsageRequest over [start, end) (epoch seconds; None leaves a bound out)."""
    fields.setdefault("user_id", "alice")
    if start is not None:
        fields["start_time"] = Timestamp(seconds=start)
    if end is not None:
        fields["end_time"] = Timestamp(seconds=end)
    return lambda s: upb.GetUsageRequest(**fields)


CASES: dict[str, Case] = {
    # --- CreateJob
    "create: no user": Case(JOB + "CreateJob", create(user_id=""), INVALID, "INVALID_INPUT"),
    "create: user with control characters": Case(
        JOB + "CreateJob", create(user_id=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "create: user too long": Case(
        JOB + "CreateJob", create(user_id=LONG), INVALID, "INVALID_INPUT"
    ),
    "create: no job type": Case(
        JOB + "CreateJob", create(job_type=""), INVALID, "UNKNOWN_JOB_TYPE"
    ),
    "create: unknown job type": Case(
        JOB + "CreateJob", create(job_type="nope"), INVALID, "UNKNOWN_JOB_TYPE"
    ),
    "create: SQL in job type": Case(
        JOB + "CreateJob", create(job_type=SQL), INVALID, "UNKNOWN_JOB_TYPE"
    ),
    "create: shell in job type": Case(
        JOB + "CreateJob", create(job_type=SHELL), INVALID, "UNKNOWN_JOB_TYPE"
    ),
    "create: input fails the schema": Case(
        JOB + "CreateJob", create(input={"sleep_ms": -1}), INVALID, "INVALID_INPUT"
    ),
    "create: input of the wrong type": Case(
        JOB + "CreateJob", create(input={"fail": SQL}), INVALID, "INVALID_INPUT"
    ),
    "create: unknown input field": Case(
        JOB + "CreateJob", create(input={"rm -rf /": SHELL}), INVALID, "INVALID_INPUT"
    ),
    "create: huge number": Case(
        JOB + "CreateJob", create(input={"sleep_ms": 1e300}), INVALID, "INVALID_INPUT"
    ),
    "create: negative huge number": Case(
        JOB + "CreateJob", create(input={"output_bytes": -(2**62)}), INVALID, "INVALID_INPUT"
    ),
    "create: NaN": Case(
        JOB + "CreateJob", create(input={"sleep_ms": float("nan")}), INVALID, "INVALID_INPUT"
    ),
    "create: control characters in input": Case(
        JOB + "CreateJob", create(input={"fail": "none\x00"}), INVALID, "INVALID_INPUT"
    ),
    "create: input over the documented 256 KiB": Case(
        JOB + "CreateJob",
        create(input={"pad": "x" * (MAX_INPUT_BYTES + 1)}),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: input nested 21 deep": Case(
        JOB + "CreateJob", create(input=_nested(21)), INVALID, "INVALID_INPUT"
    ),
    "create: input nested past protobuf's limit": Case(
        JOB + "CreateJob", lambda s: _deep_create(200), INVALID, "INVALID_INPUT"
    ),
    # --- CreateJob: targets and version pins (issue 14)
    "create: SQL in target type": Case(
        JOB + "CreateJob", create(target_type=SQL, target_id="ki-1"), INVALID, "INVALID_INPUT"
    ),
    "create: target id without a type": Case(
        JOB + "CreateJob", create(target_id="ki-1"), INVALID, "INVALID_INPUT"
    ),
    "create: target type without an id": Case(
        JOB + "CreateJob", create(target_type="knowledge_item"), INVALID, "INVALID_INPUT"
    ),
    "create: target id too long": Case(
        JOB + "CreateJob",
        create(target_type="knowledge_item", target_id=LONG),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: target type too long": Case(
        JOB + "CreateJob", create(target_type="t" * 33, target_id="x"), INVALID, "INVALID_INPUT"
    ),
    "create: unknown prompt version": Case(
        JOB + "CreateJob",
        create(job_type="feynman_evaluation", input=FEYNMAN_INPUT, prompt_version="9.9.9"),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: prompt version for a type without a prompt": Case(
        JOB + "CreateJob", create(prompt_version="1.0.0"), INVALID, "INVALID_INPUT"
    ),
    "create: SQL as prompt version": Case(
        JOB + "CreateJob",
        create(job_type="feynman_evaluation", input=FEYNMAN_INPUT, prompt_version=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: unknown output schema version": Case(
        JOB + "CreateJob", create(output_schema_version="2"), INVALID, "INVALID_INPUT"
    ),
    "create: priority too high": Case(
        JOB + "CreateJob", create(priority=2**31 - 1), INVALID, "INVALID_INPUT"
    ),
    "create: priority too low": Case(
        JOB + "CreateJob", create(priority=-(2**31)), INVALID, "INVALID_INPUT"
    ),
    "create: idempotency key with control characters": Case(
        JOB + "CreateJob", create(idempotency_key="k\x07"), INVALID, "INVALID_INPUT"
    ),
    "create: idempotency key reused for another request": Case(
        JOB + "CreateJob",
        create(idempotency_key="the-key", input={"sleep_ms": 2}),
        PRECONDITION,
        "IDEMPOTENCY_KEY_REUSED",
    ),
    "create: non-UTF-8 user id": Case(
        JOB + "CreateJob",
        lambda s: b"\x0a\x04al\xff\xfe\x12\x09synthetic",
        INVALID,
        "INVALID_INPUT",
    ),
    "create: not a protobuf at all": Case(
        JOB + "CreateJob", lambda s: b"\xff\xff\xff\xff", INVALID, "INVALID_INPUT"
    ),
    "create: no token": Case(
        JOB + "CreateJob", create(), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", token=""
    ),
    "create: wrong token": Case(
        JOB + "CreateJob",
        create(),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
        token="test-token-client-0001",
    ),
    "create: worker role": Case(
        JOB + "CreateJob",
        create(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- GetJob / CancelJob / WatchJob
    **{
        f"{verb}: {what}": Case(JOB + method, request, code, reason, stream=method == "WatchJob")
        for verb, method, cls in (
            ("get", "GetJob", jpb.GetJobRequest),
            ("cancel", "CancelJob", jpb.CancelJobRequest),
            ("watch", "WatchJob", jpb.WatchJobRequest),
        )
        for what, request, code, reason in (
            ("no id", lambda s, c=cls: c(user_id="alice"), INVALID, "INVALID_INPUT"),
            ("SQL id", lambda s, c=cls: c(job_id=SQL, user_id="alice"), INVALID, "INVALID_INPUT"),
            (
                "no user",
                lambda s, c=cls: c(job_id=s.queued, user_id=""),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "another user's job",
                lambda s, c=cls: c(job_id=s.queued, user_id="mallory"),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
            (
                "SQL as user",
                lambda s, c=cls: c(job_id=s.queued, user_id=SQL),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
            (
                "unknown job",
                lambda s, c=cls: c(job_id=UNKNOWN_ID, user_id="alice"),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
        )
    },
    "cancel: a finished job": Case(
        JOB + "CancelJob",
        lambda s: jpb.CancelJobRequest(job_id=s.succeeded, user_id="alice"),
        PRECONDITION,
        "JOB_NOT_CANCELLABLE",
    ),
    "cancel: a cancelled job": Case(
        JOB + "CancelJob",
        lambda s: jpb.CancelJobRequest(job_id=s.cancelled, user_id="alice"),
        PRECONDITION,
        "JOB_ALREADY_CANCELLED",
    ),
    "cancel: worker role": Case(
        JOB + "CancelJob",
        lambda s: jpb.CancelJobRequest(job_id=s.queued, user_id="alice"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- ListJobs
    "list: negative page size": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", page_size=-1),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: forged page token": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", page_token="eyJqb2JzIjpbXX0.AAAA"),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: SQL page token": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", page_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: id suffix too short": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", id_suffix="abc12"),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: id suffix not hexadecimal": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", id_suffix="zz1234"),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: SQL id suffix": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", id_suffix=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: id suffix longer than an id": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(id_suffix="0" * 33),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: no user": Case(
        JOB + "ListJobs", lambda s: jpb.ListJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    # --- AdminService
    "admin get: malformed id": Case(
        ADMIN + "GetJob", lambda s: apb.AdminGetJobRequest(job_id=SHELL), INVALID, "INVALID_INPUT"
    ),
    "admin get: unknown id": Case(
        ADMIN + "GetJob",
        lambda s: apb.AdminGetJobRequest(job_id=UNKNOWN_ID),
        NOT_FOUND,
        "JOB_NOT_FOUND",
    ),
    "admin get: client role": Case(
        ADMIN + "GetJob",
        lambda s: apb.AdminGetJobRequest(job_id=s.queued),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "retry: a queued job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.queued),
        PRECONDITION,
        "JOB_NOT_RETRYABLE",
    ),
    "retry: a running job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.running),
        PRECONDITION,
        "JOB_NOT_RETRYABLE",
    ),
    "retry: a succeeded job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.succeeded),
        PRECONDITION,
        "JOB_NOT_RETRYABLE",
    ),
    "retry: unknown job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=UNKNOWN_ID),
        NOT_FOUND,
        "JOB_NOT_FOUND",
    ),
    "retry: no id": Case(
        ADMIN + "RetryJob", lambda s: apb.RetryJobRequest(), INVALID, "INVALID_INPUT"
    ),
    "retry: an oversized idempotency key": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.cancelled, idempotency_key="k" * 256),
        INVALID,
        "INVALID_INPUT",
    ),
    "retry: an idempotency key with a control character": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.cancelled, idempotency_key="op\x00-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    "retry: client role": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.cancelled),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "admin list: unknown status": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(status=1234),  # type: ignore[arg-type]
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: SQL job type": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(job_type=SQL),
        INVALID,
        "UNKNOWN_JOB_TYPE",
    ),
    "admin list: target id without a type": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(target_id="ki-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: target id with control characters": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(target_type="knowledge_item", target_id=CONTROL),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: SQL target type": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", target_type=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: target id without a type": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", target_id="ki-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: SQL queue": Case(
        ADMIN + "ListJobs", lambda s: apb.AdminListJobsRequest(queue=SQL), INVALID, "INVALID_INPUT"
    ),
    "admin list: user with control characters": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(user_id=CONTROL),
        INVALID,
        "INVALID_INPUT",
    ),
    "dead letters: negative page size": Case(
        ADMIN + "ListDeadLetters",
        lambda s: apb.ListDeadLettersRequest(page_size=-7),
        INVALID,
        "INVALID_INPUT",
    ),
    "dead letters: forged token": Case(
        ADMIN + "ListDeadLetters",
        lambda s: apb.ListDeadLettersRequest(page_token="a.b"),
        INVALID,
        "INVALID_INPUT",
    ),
    "redrive: negative id": Case(
        ADMIN + "RedriveDeadLetters",
        lambda s: apb.RedriveDeadLettersRequest(event_ids=[-1]),
        INVALID,
        "INVALID_INPUT",
    ),
    "redrive: too many ids": Case(
        ADMIN + "RedriveDeadLetters",
        lambda s: apb.RedriveDeadLettersRequest(event_ids=list(range(1, 1002))),
        INVALID,
        "INVALID_INPUT",
    ),
    "definitions: worker role": Case(
        ADMIN + "ListJobDefinitions",
        lambda s: apb.ListJobDefinitionsRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- CredentialService (its own validation is tested with it; here: roles, ids)
    "put credential: worker role": Case(
        CRED + "PutCredential",
        lambda s: cpb.PutCredentialRequest(user_id="alice", provider="deepseek", api_key="sk-1"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    "put credential: no token": Case(
        CRED + "PutCredential",
        lambda s: cpb.PutCredentialRequest(user_id="alice", provider="deepseek", api_key="sk-1"),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
        token="",
    ),
    "put credential: shell in the provider": Case(
        CRED + "PutCredential",
        lambda s: cpb.PutCredentialRequest(user_id="alice", provider=SHELL, api_key="sk-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    "delete credential: SQL id": Case(
        CRED + "DeleteCredential",
        lambda s: cpb.DeleteCredentialRequest(user_id="alice", credential_id=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- UsageService (issue 19)
    "usage: no start": Case(USAGE, usage(start=None), INVALID, "INVALID_INPUT"),
    "usage: no end": Case(USAGE, usage(end=None), INVALID, "INVALID_INPUT"),
    "usage: start inside a day": Case(
        USAGE, usage(start=MIDNIGHT - 86_400 + 1), INVALID, "INVALID_INPUT"
    ),
    "usage: end inside a day": Case(USAGE, usage(end=MIDNIGHT + 3600), INVALID, "INVALID_INPUT"),
    "usage: end before start": Case(
        USAGE, usage(start=MIDNIGHT, end=MIDNIGHT - 86_400), INVALID, "INVALID_INPUT"
    ),
    "usage: an empty range": Case(
        USAGE, usage(start=MIDNIGHT, end=MIDNIGHT), INVALID, "INVALID_INPUT"
    ),
    "usage: over 400 days": Case(
        USAGE, usage(start=MIDNIGHT - 401 * 86_400), INVALID, "INVALID_INPUT"
    ),
    "usage: start out of range": Case(USAGE, usage(start=-(2**62)), INVALID, "INVALID_INPUT"),
    "usage: unknown grouping": Case(USAGE, usage(group_by=[99]), INVALID, "INVALID_INPUT"),
    "usage: unspecified grouping": Case(
        USAGE, usage(group_by=[upb.USAGE_GROUPING_UNSPECIFIED]), INVALID, "INVALID_INPUT"
    ),
    "usage: a grouping twice": Case(
        USAGE,
        usage(group_by=[upb.USAGE_GROUPING_DAY, upb.USAGE_GROUPING_DAY]),
        INVALID,
        "INVALID_INPUT",
    ),
    "usage: user with control characters": Case(
        USAGE, usage(user_id=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "usage: user too long": Case(USAGE, usage(user_id=LONG), INVALID, "INVALID_INPUT"),
    "usage: client role without a user": Case(
        USAGE, usage(user_id=""), INVALID, "INVALID_INPUT", token=CLIENT_TOKEN
    ),
    "usage: worker role": Case(
        USAGE, usage(), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", token=WORKER_TOKEN
    ),
    "usage: no token": Case(
        USAGE, usage(), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", token=""
    ),
    # --- ExecutorService
    "report usage: a token of no attempt": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=s.running,
            lease_token=UNKNOWN_ID,
            usage=[epb.ProviderUsage(provider="fake", model="m", call_id="c-1")],
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "report usage: no records": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(job_id=s.running, lease_token=s.lease_token),
        INVALID,
        "INVALID_INPUT",
    ),
    "report usage: a record without its call id": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=s.running,
            lease_token=s.lease_token,
            usage=[epb.ProviderUsage(provider="fake", model="m")],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report usage: SQL job id": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=SQL,
            lease_token=s.lease_token,
            usage=[epb.ProviderUsage(provider="fake", model="m", call_id="c-1")],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report usage: client role": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=s.running,
            lease_token=s.lease_token,
            usage=[epb.ProviderUsage(provider="fake", model="m", call_id="c-1")],
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "record step: without the lease": Case(
        EXEC + "RecordStep",
        lambda s: step(s, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "record step: a step name with a shell command": Case(
        EXEC + "RecordStep", lambda s: step(s, step=SHELL), INVALID, "INVALID_INPUT"
    ),
    "record step: no step name": Case(
        EXEC + "RecordStep", lambda s: step(s, step=""), INVALID, "INVALID_INPUT"
    ),
    "record step: no response": Case(
        EXEC + "RecordStep", lambda s: step(s, text=""), INVALID, "INVALID_INPUT"
    ),
    "record step: parsed JSON that is not an object": Case(
        EXEC + "RecordStep", lambda s: step(s, parsed_json="[1, 2]"), INVALID, "INVALID_INPUT"
    ),
    "record step: parsed JSON that is not JSON": Case(
        EXEC + "RecordStep", lambda s: step(s, parsed_json="{'a'"), INVALID, "INVALID_INPUT"
    ),
    "record step: parsed JSON nested past any limit": Case(
        EXEC + "RecordStep",
        lambda s: step(s, parsed_json='{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step: a NUL in the response": Case(
        EXEC + "RecordStep", lambda s: step(s, text="a\x00b"), INVALID, "INVALID_INPUT"
    ),
    "record step: usage without its call id": Case(
        EXEC + "RecordStep", lambda s: step(s, call_id=""), INVALID, "INVALID_INPUT"
    ),
    "record step: the usage of a failed call": Case(
        EXEC + "RecordStep",
        lambda s: step(s, error_code="PROVIDER_TIMEOUT"),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step: SQL job id": Case(
        EXEC + "RecordStep", lambda s: step(s, job_id=SQL), INVALID, "INVALID_INPUT"
    ),
    "record step: client role": Case(
        EXEC + "RecordStep",
        lambda s: step(s),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "call permit: without the lease": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=s.running, lease_token=UNKNOWN_ID, model_tier="primary"
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "call permit: no tier": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(job_id=s.running, lease_token=s.lease_token),
        INVALID,
        "INVALID_INPUT",
    ),
    "call permit: a tier past any length": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="t" * 65
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "call permit: SQL job id": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=SQL, lease_token=s.lease_token, model_tier="primary"
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "call permit: client role": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="primary"
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "report 429: without the lease": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running, lease_token=UNKNOWN_ID, model_tier="primary"
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "report 429: a negative Retry-After": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="primary", retry_after_ms=-1
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report 429: a Retry-After past an hour": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running,
            lease_token=s.lease_token,
            model_tier="primary",
            retry_after_ms=3_600_001,
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report 429: client role": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="primary"
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "resolve credential: without the lease": Case(
        EXEC + "ResolveCredential",
        lambda s: epb.ResolveCredentialRequest(job_id=s.running, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "resolve credential: client role": Case(
        EXEC + "ResolveCredential",
        lambda s: epb.ResolveCredentialRequest(job_id=s.running, lease_token=s.lease_token),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "lock: no worker id": Case(
        EXEC + "LockJob", lambda s: epb.LockJobRequest(job_id=s.queued), INVALID, "INVALID_INPUT"
    ),
    "lock: worker id with control characters": Case(
        EXEC + "LockJob",
        lambda s: epb.LockJobRequest(job_id=s.queued, worker_id=CONTROL),
        INVALID,
        "INVALID_INPUT",
    ),
    "lock: client role": Case(
        EXEC + "LockJob",
        lambda s: epb.LockJobRequest(job_id=s.queued, worker_id="w"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "lock batch: empty": Case(
        EXEC + "LockJobs", lambda s: epb.LockJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    "heartbeat: without the lease": Case(
        EXEC + "Heartbeat",
        lambda s: epb.HeartbeatRequest(job_id=s.running, lease_token=UNKNOWN_ID, progress=0.9),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "heartbeat: malformed token": Case(
        EXEC + "Heartbeat",
        lambda s: epb.HeartbeatRequest(job_id=s.running, lease_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit: without the lease": Case(
        EXEC + "SubmitResult",
        lambda s: result_request(s.running, UNKNOWN_ID, {"attempt": 1, "data": "x"}),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "submit: for a job never locked": Case(
        EXEC + "SubmitResult",
        lambda s: result_request(s.queued, UNKNOWN_ID, {"attempt": 1, "data": "x"}),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "submit: hash does not match": Case(
        EXEC + "SubmitResult",
        lambda s: epb.SubmitResultRequest(
            job_id=s.running, lease_token=s.lease_token, output_hash="0" * 64
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit: client role": Case(
        EXEC + "SubmitResult",
        lambda s: result_request(s.running, s.lease_token, {"attempt": 1, "data": "x"}),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    # lock on submit (issue 28): refused before anything is committed, the results too
    "submit batch: next grants of an unknown queue": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="no-such-queue", slots=1)),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants of no slots": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="ai-interactive", slots=0)),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants of too many slots": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="ai-interactive", slots=257)),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants for no worker": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="ai-interactive", slots=1), ""),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants with malformed definitions": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(
            s, epb.QueueSlots(queue="ai-interactive", slots=1), runnable=[SQL]
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "failure: malformed code": Case(
        EXEC + "SubmitFailure",
        lambda s: epb.SubmitFailureRequest(
            job_id=s.running, lease_token=s.lease_token, error_code=SQL
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- scheduling
    "create: both run_at and delay": Case(
        JOB + "CreateJob",
        create(run_at=Timestamp(seconds=NOW + 60), delay=Duration(seconds=5)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: negative delay": Case(
        JOB + "CreateJob", create(delay=Duration(seconds=-1)), INVALID, "INVALID_INPUT"
    ),
    "create: delay over a year": Case(
        JOB + "CreateJob", create(delay=Duration(seconds=400 * 86400)), INVALID, "INVALID_INPUT"
    ),
    "create: run_at over a year ahead": Case(
        JOB + "CreateJob",
        create(run_at=Timestamp(seconds=NOW + 400 * 86400)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: run_at beyond year 9999": Case(
        JOB + "CreateJob",
        create(run_at=Timestamp(seconds=253_402_300_800)),
        INVALID,
        "INVALID_INPUT",
    ),
    "pause: unknown queue": Case(
        ADMIN + "PauseQueue",
        lambda s: apb.PauseQueueRequest(queue="nope"),
        INVALID,
        "INVALID_INPUT",
    ),
    "pause: SQL queue": Case(
        ADMIN + "PauseQueue", lambda s: apb.PauseQueueRequest(queue=SQL), INVALID, "INVALID_INPUT"
    ),
    "pause: client role": Case(
        ADMIN + "PauseQueue",
        lambda s: apb.PauseQueueRequest(queue="ai-interactive"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "resume: unknown queue": Case(
        ADMIN + "ResumeQueue", lambda s: apb.ResumeQueueRequest(queue=""), INVALID, "INVALID_INPUT"
    ),
    "queues: worker role": Case(
        ADMIN + "ListQueues",
        lambda s: apb.ListQueuesRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    "count jobs: no window start": Case(
        ADMIN + "CountJobs", lambda s: apb.CountJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    "count jobs: a window of 40 days": Case(
        ADMIN + "CountJobs",
        lambda s: apb.CountJobsRequest(
            since=Timestamp(seconds=NOW - 40 * 86400), until=Timestamp(seconds=NOW)
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "count jobs: an empty window": Case(
        ADMIN + "CountJobs",
        lambda s: apb.CountJobsRequest(since=Timestamp(seconds=NOW), until=Timestamp(seconds=NOW)),
        INVALID,
        "INVALID_INPUT",
    ),
    "console session: malformed id": Case(
        ADMIN + "CheckConsoleSession",
        lambda s: apb.CheckConsoleSessionRequest(session_id=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "console session: closed with no id": Case(
        ADMIN + "CloseConsoleSession",
        lambda s: apb.CloseConsoleSessionRequest(),
        INVALID,
        "INVALID_INPUT",
    ),
    "console sessions: revoked for nobody": Case(
        ADMIN + "RevokeConsoleSessions",
        lambda s: apb.RevokeConsoleSessionsRequest(principal=""),
        INVALID,
        "INVALID_INPUT",
    ),
    "console session: client role": Case(
        ADMIN + "OpenConsoleSession",
        lambda s: apb.OpenConsoleSessionRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "workers: client role": Case(
        ADMIN + "ListWorkers",
        lambda s: apb.ListWorkersRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "workers: worker role": Case(
        ADMIN + "ListWorkers",
        lambda s: apb.ListWorkersRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    "rate limits: client role": Case(
        ADMIN + "ListRateLimits",
        lambda s: apb.ListRateLimitsRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "lock jobs: unknown queue": Case(
        EXEC + "LockJobs",
        lambda s: epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=s.queued, worker_id="w")], queue="nope"
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "lock jobs: a runnable definition with SQL in it": Case(
        EXEC + "LockJobs",
        lambda s: epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=s.queued, worker_id="w")],
            queue="ai-interactive",
            runnable_definitions=[SQL],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "lock jobs: too many runnable definitions": Case(
        EXEC + "LockJobs",
        lambda s: epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=s.queued, worker_id="w")],
            queue="ai-interactive",
            runnable_definitions=[f"t{n}@1" for n in range(300)],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- CreateJobs (issue 13): the call as a whole; a bad item is refused in its answer
    "create batch: no items": Case(
        JOB + "CreateJobs", lambda s: jpb.CreateJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    "create batch: 501 items": Case(
        JOB + "CreateJobs",
        lambda s: jpb.CreateJobsRequest(
            requests=[jpb.CreateJobRequest(user_id="alice", job_type="synthetic")] * 501
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create batch: not UTF-8 inside an item": Case(
        JOB + "CreateJobs",
        lambda s: _field(1, _field(1, b"\xff\xfe") + _field(2, b"synthetic")),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- CancelJobs / RetryJobs (issue 13): the selection, limit, token and reason
    **{
        f"bulk {verb}: {what}": Case(ADMIN + method, request, code, reason, token=token)
        for verb, method, cls in (
            ("cancel", "CancelJobs", apb.CancelJobsRequest),
            ("retry", "RetryJobs", apb.RetryJobsRequest),
        )
        for what, request, code, reason, token in (
            ("empty selection", lambda s, c=cls: c(), INVALID, "INVALID_INPUT", ALL_ROLES_TOKEN),
            (
                "ids and filters together",
                lambda s, c=cls: c(
                    selection=apb.JobSelection(job_ids=[s.cancelled], user_id="alice")
                ),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "1001 ids",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[UNKNOWN_ID] * 1001)),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "a malformed id",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[s.cancelled, SQL])),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "negative limit",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), limit=-1),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "limit over 1000",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), limit=1001),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "forged page token",
                lambda s, c=cls: c(
                    selection=apb.JobSelection(user_id="alice"), page_token="eyJqb2JzIjpbXX0.AAAA"
                ),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "reason with control characters",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), reason=CONTROL),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "reason too long",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), reason=LONG),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "unknown status",
                lambda s, c=cls: c(selection=apb.JobSelection(status=1234)),  # type: ignore[arg-type]
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "SQL job type",
                lambda s, c=cls: c(selection=apb.JobSelection(job_type=SQL)),
                INVALID,
                "UNKNOWN_JOB_TYPE",
                ALL_ROLES_TOKEN,
            ),
            (
                "empty creation range",
                lambda s, c=cls: c(
                    selection=apb.JobSelection(
                        created_after=Timestamp(seconds=NOW), created_before=Timestamp(seconds=NOW)
                    )
                ),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "client role",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[s.cancelled])),
                grpc.StatusCode.PERMISSION_DENIED,
                "PERMISSION_DENIED",
                CLIENT_TOKEN,
            ),
            (
                "worker role",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[s.queued])),
                grpc.StatusCode.PERMISSION_DENIED,
                "PERMISSION_DENIED",
                WORKER_TOKEN,
            ),
        )
    },
    "failure: without the lease": Case(
        EXEC + "SubmitFailure",
        lambda s: epb.SubmitFailureRequest(
            job_id=s.running, lease_token=UNKNOWN_ID, error_code="PROVIDER_TIMEOUT"
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    # --- SendSignal
    **{
        f"signal: {label}": Case(JOB + "SendSignal", request, code, reason)
        for label, request, code, reason in (
            ("no name", lambda s: signal(s.running, name=""), INVALID, "INVALID_INPUT"),
            ("name too long", lambda s: signal(s.running, name="n" * 65), INVALID, "INVALID_INPUT"),
            ("SQL as name", lambda s: signal(s.running, name=SQL), INVALID, "INVALID_INPUT"),
            (
                "control characters in name",
                lambda s: signal(s.running, name=CONTROL),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "payload too large",
                lambda s: signal(s.running, payload={"x": "y" * 70_000}),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "payload nested too deeply",
                lambda s: signal(s.running, payload=_nested(25)),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "NUL in payload",
                lambda s: signal(s.running, payload={"x": "a\x00b"}),
                INVALID,
                "INVALID_INPUT",
            ),
            ("malformed job id", lambda s: signal(SQL), INVALID, "INVALID_INPUT"),
            ("no user", lambda s: signal(s.running, user_id=""), INVALID, "INVALID_INPUT"),
            (
                "key too long",
                lambda s: signal(s.running, idempotency_key=LONG),
                INVALID,
                "INVALID_INPUT",
            ),
            ("unknown job", lambda s: signal(UNKNOWN_ID), NOT_FOUND, "JOB_NOT_FOUND"),
            (
                "another user's job",
                lambda s: signal(s.running, user_id="mallory"),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
            ("a succeeded job", lambda s: signal(s.succeeded), PRECONDITION, "JOB_FINISHED"),
            ("a cancelled job", lambda s: signal(s.cancelled), PRECONDITION, "JOB_FINISHED"),
        )
    },
    "signal: worker role": Case(
        JOB + "SendSignal",
        lambda s: signal(s.running),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- FetchSignals
    "fetch signals: without the lease": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.running, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "fetch signals: for a job never locked": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.queued, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "fetch signals: malformed token": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.running, lease_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "fetch signals: negative seq": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(
            job_id=s.running, lease_token=s.lease_token, after_seq=-1
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "fetch signals: client role": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.running, lease_token=s.lease_token),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    # --- dependencies: CreateJob's depends_on, FetchDependencyResults
    "create: a dependency that is no job id": Case(
        JOB + "CreateJob", create(depends_on=[SQL]), INVALID, "INVALID_INPUT"
    ),
    "create: another user's job as a dependency": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(user_id="bob", job_type="synthetic", depends_on=[s.running]),
        grpc.StatusCode.NOT_FOUND,
        "JOB_NOT_FOUND",
    ),
    "create: a dependency named twice": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(
            user_id="alice", job_type="synthetic", depends_on=[s.running, s.running.upper()]
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: dependencies and a delay": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(
            user_id="alice",
            job_type="synthetic",
            depends_on=[s.running],
            delay=Duration(seconds=5),
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: a dependency policy without dependencies": Case(
        JOB + "CreateJob",
        create(dependency_policy=job_pb2.DEPENDENCY_POLICY_RUN),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: an unknown dependency policy": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(
            user_id="alice", job_type="synthetic", depends_on=[s.running], dependency_policy=99
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: 10,001 dependencies": Case(
        JOB + "CreateJob",
        create(depends_on=[str(uuid.UUID(int=n)) for n in range(10_001)]),
        INVALID,
        "INVALID_INPUT",
    ),
    "fetch dependency results: without the lease": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(job_id=s.running, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "fetch dependency results: malformed token": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(job_id=s.running, lease_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "fetch dependency results: malformed after_job_id": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(
            job_id=s.running, lease_token=s.lease_token, after_job_id=SQL
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    **{
        f"fetch dependency results: page size {size}": Case(
            EXEC + "FetchDependencyResults",
            lambda s, size=size: epb.FetchDependencyResultsRequest(
                job_id=s.running, lease_token=s.lease_token, page_size=size
            ),
            INVALID,
            "INVALID_INPUT",
        )
        for size in (-1, 101)
    },
    "fetch dependency results: client role": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(job_id=s.running, lease_token=s.lease_token),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
}


async def _call(stack: SharedStack, case: Case) -> grpc.aio.AioRpcError:
    request = case.request(stack)
    raw = isinstance(request, bytes)
    async with open_channel(stack.target, case.token) as channel:
        serialize = (lambda b: b) if raw else type(request).SerializeToString
        kind = channel.unary_stream if case.stream else channel.unary_unary
        call = kind(case.method, request_serializer=serialize, response_deserializer=None)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            if case.stream:
                async for _ in call(request):
                    pass
            else:
                await call(request)
    return raised.value


def _infos(error: grpc.aio.AioRpcError, method: str) -> list[error_details_pb2.ErrorInfo]:
    """The call's ErrorInfos, each checked to name the service called as its domain."""
    status = rpc_status.from_call(error)
    assert status is not None, "no google.rpc.Status details"
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Is(info.DESCRIPTOR):
            detail.Unpack(info)
            assert info.domain == method.lstrip("/").split("/")[0]  # "jobs.v1.JobService"
            infos.append(info)
    return infos


def _reasons(error: grpc.aio.AioRpcError, method: str) -> list[str]:
    return [info.reason for info in _infos(error, method)]


def _violated_fields(error: grpc.aio.AioRpcError) -> str | None:
    """The fields the BadRequest names, comma-separated, or None without one."""
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Is(bad.DESCRIPTOR) and detail.Unpack(bad):
            return ",".join(dict.fromkeys(v.field for v in bad.field_violations))
    return None


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_input_is_refused_and_changes_nothing(
    shared_stack: SharedStack, name: str
) -> None:
    case = CASES[name]
    if name == "create: idempotency key reused for another request":
        await shared_stack.client.create(user_id="alice", key="the-key", sleep_ms=1)
    before = await count_rows(shared_stack.database_url)

    error = await _call(shared_stack, case)

    assert (error.code(), _reasons(error, case.method)) == (case.code, [case.reason])
    [info] = _infos(error, case.method)
    request = case.request(shared_stack)
    asked = getattr(request, "job_id", "") if not isinstance(request, bytes) else ""
    if asked:  # the ids involved travel in the metadata
        assert info.metadata["job_id"] == asked
    assert info.metadata.get("field") == _violated_fields(error)
    assert "Traceback" not in (error.details() or "")
    assert await count_rows(shared_stack.database_url) == before


async def test_a_request_over_the_grpc_message_limit_changes_nothing(
    shared_stack: SharedStack,
) -> None:
    before = await count_rows(shared_stack.database_url)
    big = jpb.CreateJobRequest(
        user_id="alice",
        job_type="synthetic",
        input=struct_from_dict({"pad": "x" * (65 * 1024 * 1024)}),
    )
    # a client willing to send it; the server's limit (64 MiB) refuses it
    options = [("grpc.max_send_message_length", 128 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(shared_stack.target, options=options) as channel:
        call = channel.unary_unary(
            JOB + "CreateJob", request_serializer=jpb.CreateJobRequest.SerializeToString
        )
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(big, metadata=(("authorization", f"Bearer {ALL_ROLES_TOKEN}"),))
    assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await count_rows(shared_stack.database_url) == before


async def test_metacharacters_in_free_text_fields_are_stored_as_data(
    shared_stack: SharedStack,
) -> None:
    """user_id and idempotency_key are opaque strings: metacharacters are kept verbatim
    (queries are parameterised), and the job is found again under exactly that user."""
    client = shared_stack.client
    for value in (SQL, SHELL, "ünïcödé ☃ 𝄞", "' OR '1'='1"):
        created = await client.create(user_id=value, key=value)
        assert created.created
        assert (await client.get(created.job.id, user_id=value)).idempotency_key == value
        listed = await client.jobs.ListJobs(jpb.ListJobsRequest(user_id=value))
        assert [j.id for j in listed.jobs] == [created.job.id]


# WorkerSession (issue 18): a stream of requests, each checked as it comes.
SESSION = "/jobs.v1.ExecutorService/WorkerSession"
SESSION_CASES: dict[str, list[bytes]] = {
    "session: first message without worker_id": [epb.WorkerSessionRequest().SerializeToString()],
    "session: goodbye before naming the worker": [
        epb.WorkerSessionRequest(goodbye=True).SerializeToString()
    ],
    "session: worker_id with control characters": [
        epb.WorkerSessionRequest(worker_id=CONTROL).SerializeToString()
    ],
    "session: worker_id too long": [epb.WorkerSessionRequest(worker_id=LONG).SerializeToString()],
    "session: worker_id not UTF-8": [_field(1, b"\xff\xfe")],
    "session: worker_id again after the first message": [
        epb.WorkerSessionRequest(worker_id="w-bad-1").SerializeToString(),
        epb.WorkerSessionRequest(worker_id="w-bad-2").SerializeToString(),
    ],
    "session: incarnation with control characters": [
        epb.WorkerSessionRequest(worker_id="w-bad-3", incarnation=CONTROL).SerializeToString()
    ],
    "session: incarnation too long": [
        epb.WorkerSessionRequest(worker_id="w-bad-4", incarnation=LONG).SerializeToString()
    ],
    "session: incarnation again after the first message": [
        epb.WorkerSessionRequest(worker_id="w-bad-5", incarnation="i-1").SerializeToString(),
        epb.WorkerSessionRequest(incarnation="i-2").SerializeToString(),
    ],
    "session: runnable definitions after the first message": [
        epb.WorkerSessionRequest(worker_id="w-bad-6").SerializeToString(),
        epb.WorkerSessionRequest(runnable_definitions=["synthetic@1.0.0"]).SerializeToString(),
    ],
}


@pytest.mark.parametrize("name", list(SESSION_CASES))
async def test_malformed_session_requests_are_refused(shared_stack: SharedStack, name: str) -> None:
    before = await count_rows(shared_stack.database_url)
    async with open_channel(shared_stack.target, WORKER_TOKEN) as channel:
        call = channel.stream_stream(
            SESSION, request_serializer=lambda b: b, response_deserializer=None
        )(iter(SESSION_CASES[name]))
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            async for _ in call:
                pass

    assert (raised.value.code(), _reasons(raised.value, SESSION)) == (INVALID, ["INVALID_INPUT"])
    assert await count_rows(shared_stack.database_url) == before
