"""The gRPC adapter's translations, against a stub fake (no sockets)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2
from google.rpc import code_pb2, status_pb2

from shared.errors import LeaseLost, PlatformUnavailable
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import ArtifactDraft
from shared.rpc_errors import status_for, status_proto_for
from worker_service.adapters.grpc_executor import MAX_CALL_BYTES, GrpcExecutorClient
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable
from worker_service.domain.model import LockOutcome, LockResult, ResultSubmission, Succeeded
from worker_service.ports import MAX_BATCH

from .fakes import submission


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


async def test_lock_jobs_sends_one_call_and_converts_each_answer_in_order() -> None:
    job = pb.LockedJob(
        job_id="j",
        job_type="synthetic",
        lease_token="t",
        attempt=2,
        input=struct_from_dict({"sleep_ms": 5, "fail": "none"}),
        lease_ttl_ms=5000,
        heartbeat_interval_ms=1000,
    )
    client, stub = client_answering(
        pb.LockJobsResponse(
            responses=[
                pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_LOCKED, job=job),
                pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_UNAVAILABLE),
            ]
        )
    )

    locked, gone = await client.lock_jobs(["j", "k"], "w", timeout_s=3)

    assert isinstance(locked, LockResult) and isinstance(gone, LockResult)
    assert locked.outcome is LockOutcome.LOCKED and locked.job is not None
    assert locked.job.input == {"sleep_ms": 5, "fail": "none"}
    assert isinstance(locked.job.input["sleep_ms"], int)
    assert (locked.job.lease_token, locked.job.attempt, locked.job.lease_ttl_s) == ("t", 2, 5.0)
    assert gone.outcome is LockOutcome.UNAVAILABLE
    [(rpc, request, timeout)] = stub.requests
    assert (rpc, timeout) == ("LockJobs", 3)
    assert [(r.job_id, r.worker_id) for r in request.requests] == [("j", "w"), ("k", "w")]


async def test_not_due_carries_retry_after_in_epoch_seconds() -> None:
    client, _ = client_answering(
        pb.LockJobsResponse(
            responses=[
                pb.LockJobResponse(
                    outcome=pb.LOCK_OUTCOME_NOT_DUE,
                    retry_after=timestamp_pb2.Timestamp(seconds=100),
                )
            ]
        )
    )
    [result] = await client.lock_jobs(["j"], "w", timeout_s=3)
    assert isinstance(result, LockResult)
    assert (result.outcome, result.retry_after) == (LockOutcome.NOT_DUE, 100.0)


async def test_an_unspecified_outcome_fails_that_item_only() -> None:
    client, _ = client_answering(
        pb.LockJobsResponse(
            responses=[
                pb.LockJobResponse(),
                pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_UNAVAILABLE),
            ]
        )
    )
    odd, gone = await client.lock_jobs(["j", "k"], "w", timeout_s=3)
    assert isinstance(odd, ExecutorCallFailed)
    assert isinstance(gone, LockResult) and gone.outcome is LockOutcome.UNAVAILABLE


async def test_a_batch_answer_of_the_wrong_length_is_a_failed_call() -> None:
    client, _ = client_answering(pb.LockJobsResponse(responses=[pb.LockJobResponse()]))
    with pytest.raises(ExecutorCallFailed):
        await client.lock_jobs(["j", "k"], "w", timeout_s=3)

    client, _ = client_answering(pb.SubmitResultsResponse())
    with pytest.raises(ExecutorCallFailed):
        await client.submit_results([submission("j")], timeout_s=3)


async def test_batches_larger_than_the_service_takes_are_refused_before_sending() -> None:
    client, stub = client_answering(pb.LockJobsResponse())
    with pytest.raises(ValueError):
        await client.lock_jobs([f"j{n}" for n in range(MAX_BATCH + 1)], "w", timeout_s=3)
    assert stub.requests == []


async def test_submit_results_sends_structs_and_returns_the_status_names() -> None:
    client, stub = client_answering(
        pb.SubmitResultsResponse(
            outcomes=[
                pb.SubmitResultOutcome(status=job_pb2.JOB_STATUS_SUCCEEDED),
                pb.SubmitResultOutcome(status=job_pb2.JOB_STATUS_CANCELLED),
            ]
        )
    )
    result = Succeeded({"a": 1}, "h", [ArtifactDraft("k", "i", {"x": [1]}, 3)])
    first = ResultSubmission("j", "t", result)

    statuses = await client.submit_results([first, submission("k")], timeout_s=1)

    assert statuses == ["SUCCEEDED", "CANCELLED"]
    [(rpc, request, timeout)] = stub.requests
    assert (rpc, timeout) == ("SubmitResults", 1)
    assert [(r.job_id, r.lease_token) for r in request.requests] == [("j", "t"), ("k", "token-k")]
    sent = request.requests[0]
    assert dict_from_struct(sent.output) == {"a": 1} and sent.output_hash == "h"
    assert sent.artifacts[0].ordinal == 3
    assert dict_from_struct(sent.artifacts[0].payload) == {"x": [1]}


async def test_a_refused_result_item_is_its_product_error_and_spares_the_others() -> None:
    client, _ = client_answering(
        pb.SubmitResultsResponse(
            outcomes=[
                pb.SubmitResultOutcome(status=job_pb2.JOB_STATUS_SUCCEEDED),
                pb.SubmitResultOutcome(
                    error=status_proto_for(LeaseLost("stale"), "jobs.v1.ExecutorService")
                ),
                pb.SubmitResultOutcome(
                    error=status_proto_for(PlatformUnavailable("db"), "jobs.v1.ExecutorService")
                ),
            ]
        )
    )

    ok, lost, down = await client.submit_results(
        [submission("a"), submission("b"), submission("c")], timeout_s=1
    )

    assert ok == "SUCCEEDED"
    assert isinstance(lost, LeaseLost) and str(lost) == "stale"
    assert isinstance(down, PlatformUnavailable)


@pytest.mark.parametrize(
    ("code", "expected"),
    [(code_pb2.UNAVAILABLE, ExecutorUnreachable), (code_pb2.INTERNAL, ExecutorCallFailed)],
)
async def test_a_refused_item_without_a_reason_is_judged_by_its_code(
    code: int, expected: type[Exception]
) -> None:
    client, _ = client_answering(
        pb.SubmitResultsResponse(
            outcomes=[pb.SubmitResultOutcome(error=status_pb2.Status(code=code, message="x"))]
        )
    )
    [answer] = await client.submit_results([submission("a")], timeout_s=1)
    assert isinstance(answer, expected)


async def test_a_failed_batch_call_raises_for_the_whole_batch() -> None:
    client, _ = client_answering(rpc_error(grpc.StatusCode.UNAVAILABLE))
    with pytest.raises(ExecutorUnreachable):
        await client.lock_jobs(["j"], "w", timeout_s=1)
    with pytest.raises(ExecutorUnreachable):
        await client.submit_results([submission("j")], timeout_s=1)


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
    status = status_for(error, "jobs.v1.ExecutorService")  # type: ignore[arg-type]
    client, _ = client_answering(
        rpc_error(status.code, status.trailing_metadata, details=status.details)
    )

    with pytest.raises(type(error)):
        await client.submit_failure("j", "t", "CANCELLED", "", timeout_s=1)


async def test_a_garbled_status_detail_counts_as_no_reason() -> None:
    status = status_for(LeaseLost("stale"), "jobs.v1.ExecutorService")
    client, _ = client_answering(
        rpc_error(grpc.StatusCode.UNAVAILABLE, status.trailing_metadata, details="other")
    )

    with pytest.raises(ExecutorUnreachable):
        await client.heartbeat("j", "t", -1.0, timeout_s=1)


class CountingStub:
    """Answers each SubmitResults call with SUCCEEDED per item; fails the calls whose first
    item's job id is in ``failing``."""

    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.calls: list[list[str]] = []

    async def SubmitResults(self, request: Any, **options: Any) -> Any:
        job_ids = [r.job_id for r in request.requests]
        self.calls.append(job_ids)
        if job_ids[0] in self.failing:
            raise rpc_error(grpc.StatusCode.UNAVAILABLE)
        return pb.SubmitResultsResponse(
            outcomes=[pb.SubmitResultOutcome(status=job_pb2.JOB_STATUS_SUCCEEDED)] * len(job_ids)
        )


async def test_results_too_large_for_one_message_go_in_parts_that_fail_alone() -> None:
    client = GrpcExecutorClient.__new__(GrpcExecutorClient)
    client._stub = stub = CountingStub(failing={"b"})  # type: ignore[assignment]
    big = "x" * (MAX_CALL_BYTES // 2 - 1000)
    submissions = [ResultSubmission("a", "t", Succeeded({"data": big * 2}, "h"))]
    submissions += [ResultSubmission(j, "t", Succeeded({"data": big}, "h")) for j in "bcd"]
    submissions.append(submission("e"))

    answers = await client.submit_results(submissions, timeout_s=1)

    # Two big results fit in one part; the part starting with "b" fails on its own.
    assert stub.calls == [["a"], ["b", "c"], ["d", "e"]]
    assert answers[0] == answers[3] == answers[4] == "SUCCEEDED"
    assert isinstance(answers[1], ExecutorUnreachable)
    assert answers[1] is answers[2]
