"""The gRPC adapter's translations, against a stub fake (no sockets)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from shared.errors import LeaseLost, PlatformUnavailable
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import ArtifactDraft
from shared.rpc_errors import status_for
from worker_service.adapters.grpc_executor import GrpcExecutorClient
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable
from worker_service.domain.model import LockOutcome


class FakeStub:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[tuple[str, Any, float]] = []

    def __getattr__(self, rpc: str) -> Any:
        async def call(request: Any, **options: Any) -> Any:
            self.requests.append((rpc, request, options["timeout"]))
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

        return call


def client_answering(answer: Any) -> tuple[GrpcExecutorClient, FakeStub]:
    client = GrpcExecutorClient.__new__(GrpcExecutorClient)
    stub = FakeStub(answer)
    client._stub = stub  # type: ignore[assignment]
    return client, stub


def rpc_error(
    code: grpc.StatusCode, trailing: tuple[tuple[str, Any], ...] = (), details: str = "nope"
) -> Exception:
    error: Exception = grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details=details
    )
    return error


async def test_locked_job_is_converted() -> None:
    job = pb.LockedJob(
        job_id="j",
        job_type="synthetic",
        lease_token="t",
        attempt=2,
        input=struct_from_dict({"sleep_ms": 5, "fail": "none"}),
        lease_ttl_ms=5000,
        heartbeat_interval_ms=1000,
    )
    client, stub = client_answering(pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_LOCKED, job=job))

    result = await client.lock_job("j", "w", timeout_s=3)

    assert result.outcome is LockOutcome.LOCKED and result.job is not None
    assert result.job.input == {"sleep_ms": 5, "fail": "none"}
    assert isinstance(result.job.input["sleep_ms"], int)
    assert (result.job.lease_token, result.job.attempt, result.job.lease_ttl_s) == ("t", 2, 5.0)
    assert stub.requests[0][0] == "LockJob" and stub.requests[0][2] == 3


async def test_not_due_carries_retry_after_in_epoch_seconds() -> None:
    client, _ = client_answering(
        pb.LockJobResponse(
            outcome=pb.LOCK_OUTCOME_NOT_DUE, retry_after=timestamp_pb2.Timestamp(seconds=100)
        )
    )
    result = await client.lock_job("j", "w", timeout_s=3)
    assert (result.outcome, result.retry_after) == (LockOutcome.NOT_DUE, 100.0)


async def test_unspecified_outcome_is_a_failed_call() -> None:
    client, _ = client_answering(pb.LockJobResponse())
    with pytest.raises(ExecutorCallFailed):
        await client.lock_job("j", "w", timeout_s=3)


async def test_submit_result_sends_structs_and_returns_the_status_name() -> None:
    client, stub = client_answering(pb.SubmitResultResponse(status=job_pb2.JOB_STATUS_SUCCEEDED))

    status = await client.submit_result(
        "j", "t", {"a": 1}, "h", [ArtifactDraft("k", "i", {"x": [1]}, 3)], timeout_s=1
    )

    assert status == "SUCCEEDED"
    request = stub.requests[0][1]
    assert dict_from_struct(request.output) == {"a": 1}
    assert request.artifacts[0].ordinal == 3
    assert dict_from_struct(request.artifacts[0].payload) == {"x": [1]}


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (rpc_error(grpc.StatusCode.UNAVAILABLE), ExecutorUnreachable),
        (rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED), ExecutorUnreachable),
        (rpc_error(grpc.StatusCode.INTERNAL), ExecutorCallFailed),
    ],
)
async def test_failures_without_a_reason(error: Exception, expected: type[Exception]) -> None:
    client, _ = client_answering(error)
    with pytest.raises(expected):
        await client.heartbeat("j", "t", -1.0, timeout_s=1)


@pytest.mark.parametrize("error", [LeaseLost("stale"), PlatformUnavailable("db down")])
async def test_failures_with_a_reason_become_product_errors(error: Exception) -> None:
    status = status_for(error)  # type: ignore[arg-type]
    client, _ = client_answering(
        rpc_error(status.code, status.trailing_metadata, details=status.details)
    )

    with pytest.raises(type(error)):
        await client.submit_failure("j", "t", "CANCELLED", "", timeout_s=1)


async def test_a_garbled_status_detail_counts_as_no_reason() -> None:
    status = status_for(LeaseLost("stale"))
    client, _ = client_answering(
        rpc_error(grpc.StatusCode.UNAVAILABLE, status.trailing_metadata, details="other")
    )

    with pytest.raises(ExecutorUnreachable):
        await client.heartbeat("j", "t", -1.0, timeout_s=1)
