"""The bad-input invariant as a property (Hypothesis): whatever request arrives — any
strings, numbers, JSON, ids, tokens — a refusal carries a documented code and exactly one
ErrorInfo with a known reason, never INTERNAL, and changes no row; an accepted call changes
exactly what its operation writes."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.errors import Reason
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import usage_service_pb2 as upb
from shared.pbconv import struct_from_dict
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import (
    ADMIN_TOKEN,
    ALL_ROLES_TOKEN,
    CLIENT_TOKEN,
    WORKER_TOKEN,
    count_rows,
    open_channel,
)

__all__ = ["shared_stack"]

DOCUMENTED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
NOTHING: dict[str, int] = {}
ONE_JOB = {"jobs": 1, "job_snapshots": 1, "job_events": 1, "outbox_events": 1}

texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "alice", "synthetic", "x'; DROP TABLE jobs; --", "$(reboot)", "\x00"]),
)
# "@queued" and friends stand for alice's jobs of the shared stack (filled in per call)
PLACEHOLDERS = ("@queued", "@running", "@succeeded", "@cancelled")
ids = st.one_of(st.uuids().map(str), texts, st.sampled_from(PLACEHOLDERS))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70).map(float)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
inputs = st.one_of(
    st.dictionaries(st.text(max_size=12), json_values, max_size=5),
    st.fixed_dictionaries(
        {},
        optional={
            "sleep_ms": st.integers(-(2**40), 2**40),
            "fail": st.sampled_from(["none", "fatal", "bogus"]),
            "output_bytes": st.integers(-10, 2**31),
        },
    ),
)
tokens = st.sampled_from(
    [ALL_ROLES_TOKEN, ALL_ROLES_TOKEN, CLIENT_TOKEN, ADMIN_TOKEN, WORKER_TOKEN, "", "guess"]
)


# GetUsage's bounds: any instant, or a UTC midnight near today (which it accepts)
MIDNIGHT = int(time.time()) // 86_400 * 86_400
instants = st.one_of(
    st.integers(-(2**40), 2**40), st.integers(-500, 500).map(lambda d: MIDNIGHT + d * 86_400)
)


def _usage(user: str, start: int, end: int, group_by: list[int]) -> Any:
    request = upb.GetUsageRequest(
        user_id=user,
        start_time=Timestamp(seconds=start),
        end_time=Timestamp(seconds=end),
        group_by=group_by,
    )
    return ("/jobs.v1.UsageService/GetUsage", request)


def _create(user: str, job_type: str, raw: dict[str, Any], key: str, prio: int | None) -> Any:
    request = jpb.CreateJobRequest(
        user_id=user, job_type=job_type, input=struct_from_dict(raw), idempotency_key=key
    )
    if prio is not None:
        request.priority = prio
    return ("/jobs.v1.JobService/CreateJob", request)


requests = st.one_of(
    st.builds(
        _create,
        texts,
        st.one_of(st.just("synthetic"), texts),
        inputs,
        texts,
        st.none() | st.integers(-(2**31), 2**31 - 1),
    ),
    st.builds(
        lambda i, u: ("/jobs.v1.JobService/GetJob", jpb.GetJobRequest(job_id=i, user_id=u)),
        ids,
        texts,
    ),
    st.builds(
        lambda i, u: ("/jobs.v1.JobService/CancelJob", jpb.CancelJobRequest(job_id=i, user_id=u)),
        ids,
        texts,
    ),
    st.builds(
        lambda u, n, t: (
            "/jobs.v1.JobService/ListJobs",
            jpb.ListJobsRequest(user_id=u, page_size=n, page_token=t),
        ),
        texts,
        st.integers(-(2**31), 2**31 - 1),
        texts,
    ),
    st.builds(lambda i: ("/jobs.v1.AdminService/RetryJob", apb.RetryJobRequest(job_id=i)), ids),
    st.builds(
        lambda method, ids_, user, status, limit, token, reason, dry: (
            f"/jobs.v1.AdminService/{method}",
            getattr(apb, f"{method}Request")(
                selection=apb.JobSelection(job_ids=ids_, user_id=user, status=status),
                limit=limit,
                page_token=token,
                reason=reason,
                dry_run=dry,
            ),
        ),
        st.sampled_from(["CancelJobs", "RetryJobs"]),
        st.lists(ids, max_size=3),
        texts,
        st.integers(0, 12),
        st.integers(-(2**31), 2**31 - 1),
        texts,
        texts,
        st.booleans(),
    ),
    st.builds(
        lambda i, t, p: (
            "/jobs.v1.ExecutorService/Heartbeat",
            epb.HeartbeatRequest(job_id=i, lease_token=t, progress=p),
        ),
        ids,
        ids,
        st.floats(allow_nan=True),
    ),
    st.builds(
        lambda i, t, c: (
            "/jobs.v1.ExecutorService/SubmitFailure",
            epb.SubmitFailureRequest(job_id=i, lease_token=t, error_code=c),
        ),
        ids,
        ids,
        texts,
    ),
    st.builds(_usage, texts, instants, instants, st.lists(st.integers(-1, 6), max_size=5)),
)


def _reasons(error: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(error)
    assert status is not None
    found = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Is(info.DESCRIPTOR):
            detail.Unpack(info)
            found.append(info.reason)
    return found


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {t: after[t] - before[t] for t in before if after[t] != before[t]}


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests, token=tokens)
async def test_any_request_is_answered_as_documented_and_refusals_change_nothing(
    shared_stack: SharedStack, request: tuple[str, Message], token: str
) -> None:
    method, message = request
    if getattr(message, "job_id", "") in PLACEHOLDERS:
        message.job_id = getattr(shared_stack, message.job_id[1:])  # type: ignore[attr-defined]
    if isinstance(message, apb.CancelJobsRequest | apb.RetryJobsRequest):
        named = message.selection.job_ids
        named[:] = [getattr(shared_stack, i[1:]) if i in PLACEHOLDERS else i for i in named]
    before = await count_rows(shared_stack.database_url)
    async with open_channel(shared_stack.target, token) as channel:
        call = channel.unary_unary(
            method,
            request_serializer=type(message).SerializeToString,
            response_deserializer=None,
        )
        try:
            answer = await call(message)
        except grpc.aio.AioRpcError as error:
            assert error.code() in DOCUMENTED, (error.code(), error.details())
            [reason] = _reasons(error)
            assert Reason(reason) is not Reason.INTERNAL
            assert await count_rows(shared_stack.database_url) == before
            return
    delta = _delta(before, await count_rows(shared_stack.database_url))
    if method.endswith("CreateJob"):
        created = jpb.CreateJobResponse.FromString(answer).created
        delta.pop("job_quota_usage", None)  # a user's first job of the day adds its counter
        assert delta == (ONE_JOB if created else NOTHING)
    elif method.endswith("RetryJob"):
        assert delta == ONE_JOB
    elif method.endswith("CancelJob"):
        assert delta in ({"job_events": 1}, {"job_events": 1, "outbox_events": 1})
    elif method.endswith(("CancelJobs", "RetryJobs")):
        if message.dry_run:  # type: ignore[attr-defined]
            assert delta == NOTHING
        else:  # what a cancel or a re-run writes, nothing else
            assert set(delta) <= {"jobs", "job_snapshots", "job_events", "outbox_events"}
    else:
        assert delta == NOTHING
