"""The bad-input suite's vocabulary (tests/integration/test_bad_input*.py): a ``Case`` is
one malformed request, the code and reason it must be refused with; the builders of
requests, and the check every case goes through."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from jobtypes import synthetic
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import usage_service_pb2 as upb
from shared.pbconv import struct_from_dict
from tests.support.shared_stack import SharedStack
from tests.support.stack import (
    ALL_ROLES_TOKEN,
    count_rows,
    open_channel,
    result_request,
)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"
SQL = "x'; DROP TABLE jobs; --"
SHELL = "$(rm -rf /); `reboot` | cat /etc/passwd &"
CONTROL = "al\x00ice\n\x1b[31m"
LONG = "u" * 256


def nested_input(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"k": value}
    return value


def encoded_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, encoded by hand."""
    key, length = (number << 3) | 2, len(payload)
    varint = bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes([key]) + bytes(varint) + payload


def deep_create(depth: int) -> bytes:
    """A CreateJobRequest whose input nests deeper than protobuf's own parse limit (no
    protobuf library builds one, so it is encoded by hand)."""
    struct = b""
    for _ in range(depth):
        value = encoded_field(5, struct)  # Value.struct_value
        # Struct.fields["k"]
        struct = encoded_field(1, encoded_field(1, b"k") + encoded_field(2, value))
    return encoded_field(1, b"alice") + encoded_field(2, b"synthetic") + encoded_field(3, struct)


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


def step_result(
    s: SharedStack, outcome: epb.StepOutcome | None = None, **fields: Any
) -> epb.RecordStepResultRequest:
    """A RecordStepResult for the running job under its lease, ``fields`` changed."""
    values = {
        "job_id": s.running,
        "lease_token": s.lease_token,
        "ordinal": 0,
        "name": "charge",
        **fields,
    }
    return epb.RecordStepResultRequest(
        **values, outcome=outcome or epb.StepOutcome(result_json='{"receipt": "r-1"}')
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


def declaration(worker_id: str = "w-declares", **fields: Any) -> Callable[[SharedStack], Message]:
    """A DeclareJobType of a new job type's valid spec, ``fields`` of the spec changed."""
    new_type = replace(synthetic.DEFINITION, job_type="declared_here", version="1")
    spec = spec_of(new_type)
    for name, value in fields.items():
        if isinstance(value, list):
            del getattr(spec, name)[:]
            getattr(spec, name).extend(value)
        else:
            setattr(spec, name, value)
    return lambda s: epb.DeclareJobTypeRequest(worker_id=worker_id, spec=spec)


def padded_schema(extra_bytes: int) -> str:
    """The new job type's input schema, valid, made ``extra_bytes`` longer by a description."""
    schema = json.loads(spec_of(synthetic.DEFINITION).input_schema_json)
    return json.dumps({**schema, "description": "x" * extra_bytes})


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


async def call(stack: SharedStack, case: Case) -> grpc.aio.AioRpcError:
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


def infos(error: grpc.aio.AioRpcError, method: str) -> list[error_details_pb2.ErrorInfo]:
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


def reasons(error: grpc.aio.AioRpcError, method: str) -> list[str]:
    return [info.reason for info in infos(error, method)]


def violated_fields(error: grpc.aio.AioRpcError) -> str | None:
    """The fields the BadRequest names, comma-separated, or None without one."""
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Is(bad.DESCRIPTOR) and detail.Unpack(bad):
            return ",".join(dict.fromkeys(v.field for v in bad.field_violations))
    return None


async def assert_refused_and_unchanged(stack: SharedStack, name: str, case: Case) -> None:
    """The case's request is refused with its code and exactly one ErrorInfo of its reason,
    the ids and field involved in its metadata, no traceback, and no table changes."""
    if name == "create: idempotency key reused for another request":
        await stack.client.create(user_id="alice", key="the-key", sleep_ms=1)
    before = await count_rows(stack.database_url)

    error = await call(stack, case)

    assert (error.code(), reasons(error, case.method)) == (case.code, [case.reason])
    [info] = infos(error, case.method)
    request = case.request(stack)
    asked = getattr(request, "job_id", "") if not isinstance(request, bytes) else ""
    if asked:  # the ids involved travel in the metadata
        assert info.metadata["job_id"] == asked
    assert info.metadata.get("field") == violated_fields(error)
    assert "Traceback" not in (error.details() or "")
    assert await count_rows(stack.database_url) == before
