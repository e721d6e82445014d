"""One attempt through the pipeline: what is executed, and what the job service is told."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shared.errors import ErrorCode, InvalidInput, LeaseLost, PlatformUnavailable
from shared.output_hash import output_hash
from shared.registry import ArtifactDraft
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.domain.model import CancelCause, HeartbeatReply
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher

from .fakes import FakeExecutor, ProbeLog, eventually, locked, probe_definition


@pytest.fixture
async def results(executor: FakeExecutor) -> AsyncIterator[ResultBatcher]:
    async with ResultBatcher(executor) as batcher:
        yield batcher


@pytest.fixture
def pipeline(executor: FakeExecutor, results: ResultBatcher, probe: ProbeLog) -> Pipeline:
    definitions = {"probe": probe_definition(probe), "probe_fast": probe_definition(probe)}
    return Pipeline(executor, results, definitions.__getitem__, worker_id="w-test")


async def test_success_submits_validated_output_hash_and_artifacts(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    await pipeline.run(locked("j1", attempt=3))

    assert executor.failures == []
    [result] = executor.results
    assert result["job_id"] == "j1"
    assert result["lease_token"] == "token-j1-3"
    assert result["output"] == {"value": 3, "label": "résumé"}
    assert result["output_hash"] == output_hash({"value": 3, "label": "résumé"})
    # Artifact payloads reach the port as plain JSON values (the tuple became a list).
    assert result["artifacts"] == [
        ArtifactDraft("probe", "probe_j1", {"n": 1, "tags": ["a", "b"]}, 2)
    ]
    # A job shorter than one heartbeat interval costs no heartbeat at all.
    assert executor.heartbeats == []


async def test_execution_error_reports_its_code_and_detail(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    await pipeline.run(locked("j1", mode="error", code="PROVIDER_RATE_LIMITED"))

    assert executor.results == []
    assert executor.failures == [
        {
            "job_id": "j1",
            "lease_token": "token-j1-1",
            "error_code": "PROVIDER_RATE_LIMITED",
            "error_message": "the probe failed on purpose",
        }
    ]


async def test_unexpected_exception_is_internal_error_naming_its_type(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    await pipeline.run(locked("j1", mode="boom"))

    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.INTERNAL_ERROR
    assert failure["error_message"] == "RuntimeError: kaput"


async def test_a_cancelled_error_escaping_the_job_is_an_internal_error(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    await pipeline.run(locked("j1", mode="self_cancel"))

    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.INTERNAL_ERROR


async def test_a_cancel_for_the_pipeline_itself_propagates_and_stops_the_job(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    run = asyncio.create_task(pipeline.run(locked("j1", mode="hang")))
    await eventually(lambda: probe.started == ["j1"], what="the job to start")

    run.cancel()

    with pytest.raises(asyncio.CancelledError):
        await run
    assert probe.cancelled == ["j1"]
    assert executor.submit_calls == 0
    assert pipeline.running == 0


async def test_timeout_reports_timeout_and_stops_the_job(
    executor: FakeExecutor, results: ResultBatcher
) -> None:
    probe = ProbeLog()
    definitions = {"probe": probe_definition(probe, timeout_s=0.05)}
    pipeline = Pipeline(executor, results, definitions.__getitem__)

    await asyncio.wait_for(pipeline.run(locked("j1", mode="hang")), 5)

    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.TIMEOUT
    assert probe.cancelled == ["j1"]


async def test_output_schema_violation_reports_validation_output_schema(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    await pipeline.run(locked("j1", mode="bad_output"))

    assert executor.results == []
    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.VALIDATION_OUTPUT_SCHEMA
    assert "value" in failure["error_message"]
    # Operator detail names the field, never the offending value.
    assert "many" not in failure["error_message"]


async def test_input_not_matching_its_model_is_internal_error_without_values(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    await pipeline.run(locked("j1", mode="ok", secret_field="hunter2"))

    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.INTERNAL_ERROR
    assert "secret_field" in failure["error_message"]
    assert "hunter2" not in failure["error_message"]
    assert probe.started == []


async def test_unknown_job_type_is_internal_error(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    await pipeline.run(locked("j1", job_type="nope"))

    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.INTERNAL_ERROR
    assert failure["error_message"].startswith("KeyError")


async def test_heartbeats_carry_progress_and_extend_while_the_job_runs(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    run = asyncio.create_task(pipeline.run(locked("j1", heartbeat_ms=10, mode="hang")))
    await eventually(lambda: len(executor.heartbeats) >= 3, what="three heartbeats")
    assert all(h[:2] == ("j1", "token-j1-1") for h in executor.heartbeats)
    assert executor.heartbeats[0][2] == -1.0  # no progress reported yet

    assert pipeline.cancel("j1") is True
    await asyncio.wait_for(run, 5)


async def test_heartbeat_cancel_requested_cancels_the_job_and_reports_cancelled(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    executor.on_heartbeat = lambda n: HeartbeatReply(cancel_requested=n >= 2)

    await asyncio.wait_for(pipeline.run(locked("j1", heartbeat_ms=10, mode="hang")), 5)

    assert probe.cancelled == ["j1"]
    assert len(executor.heartbeats) == 2
    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.CANCELLED
    assert failure["lease_token"] == "token-j1-1"
    assert executor.results == []


async def test_lease_lost_on_heartbeat_cancels_the_job_and_submits_nothing(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    def lost(n: int) -> HeartbeatReply:
        raise LeaseLost("lease lost")

    executor.on_heartbeat = lost

    await asyncio.wait_for(pipeline.run(locked("j1", heartbeat_ms=10, mode="hang")), 5)

    assert probe.cancelled == ["j1"]
    assert executor.submit_calls == 0
    assert pipeline.running == 0


async def test_transient_heartbeat_errors_are_retried_until_the_lease_runs_out(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    def down(n: int) -> HeartbeatReply:
        raise ExecutorUnreachable("UNAVAILABLE")

    executor.on_heartbeat = down

    job = locked("j1", heartbeat_ms=10, ttl_ms=300, mode="hang")
    await asyncio.wait_for(pipeline.run(job), 5)

    assert len(executor.heartbeats) >= 3  # kept trying
    assert probe.cancelled == ["j1"]  # then stopped: someone else owns the job by now
    assert executor.submit_calls == 0


async def test_a_transient_heartbeat_error_keeps_the_job_running(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    def flaky(n: int) -> HeartbeatReply:
        if n == 1:
            raise PlatformUnavailable("database down")
        return HeartbeatReply(False)

    executor.on_heartbeat = flaky

    await pipeline.run(locked("j1", heartbeat_ms=10, mode="sleep", sleep_s=0.15))

    assert len(executor.heartbeats) >= 2
    assert probe.cancelled == []
    assert len(executor.results) == 1


async def test_cancel_message_stops_a_running_job_at_once(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    run = asyncio.create_task(pipeline.run(locked("j1", mode="hang")))
    await eventually(lambda: probe.started == ["j1"], what="the job to start")

    assert pipeline.cancel("j1") is True
    await asyncio.wait_for(run, 1)

    assert probe.cancelled == ["j1"]
    assert [f["error_code"] for f in executor.failures] == [ErrorCode.CANCELLED]


async def test_cancel_that_beats_the_lock_answer_still_cancels(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    assert pipeline.cancel("j1") is False  # not running here yet

    await asyncio.wait_for(pipeline.run(locked("j1", mode="hang")), 1)

    assert probe.started == []
    assert [f["error_code"] for f in executor.failures] == [ErrorCode.CANCELLED]


async def test_shutdown_hands_back_running_attempts_and_refuses_new_ones(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    run = asyncio.create_task(pipeline.run(locked("j1", mode="hang")))
    await eventually(lambda: probe.started == ["j1"], what="the job to start")

    assert pipeline.shutdown() == 1
    await asyncio.wait_for(run, 1)
    await pipeline.run(locked("j2", mode="ok"))

    assert probe.started == ["j1"]
    assert [(f["job_id"], f["error_code"]) for f in executor.failures] == [
        ("j1", ErrorCode.WORKER_SHUTDOWN),
        ("j2", ErrorCode.WORKER_SHUTDOWN),
    ]


async def test_lease_lost_wins_over_an_earlier_cancel(
    pipeline: Pipeline, executor: FakeExecutor, probe: ProbeLog
) -> None:
    run = asyncio.create_task(pipeline.run(locked("j1", mode="hang")))
    await eventually(lambda: probe.started == ["j1"], what="the job to start")

    pipeline.cancel("j1", CancelCause.SHUTDOWN)
    pipeline.cancel("j1", CancelCause.LEASE_LOST)
    await asyncio.wait_for(run, 1)

    assert executor.submit_calls == 0


async def test_submit_retries_transient_errors(pipeline: Pipeline, executor: FakeExecutor) -> None:
    executor.submit_errors = [ExecutorUnreachable("UNAVAILABLE"), PlatformUnavailable("db")]

    await asyncio.wait_for(pipeline.run(locked("j1")), 5)

    assert executor.submit_calls == 3
    assert len(executor.results) == 1


async def test_a_transiently_refused_result_is_retried(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.refusals["j1"] = [PlatformUnavailable("db")]

    await asyncio.wait_for(pipeline.run(locked("j1")), 5)

    assert executor.result_batches == [["j1"], ["j1"]]
    assert [r["job_id"] for r in executor.results] == ["j1"]


async def test_a_failed_results_call_is_retried_per_job(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.submit_errors = [ExecutorUnreachable("UNAVAILABLE")]
    jobs = [locked(f"j{n}") for n in range(3)]

    await asyncio.wait_for(asyncio.gather(*(pipeline.run(job) for job in jobs)), 5)

    # Finishing together, the three results went in one call, which failed; each job then
    # submitted again on its own account.
    failed, *later = executor.result_batches
    assert failed == ["j0", "j1", "j2"]
    assert all(any(job_id in batch for batch in later) for job_id in failed)
    assert sorted(r["job_id"] for r in executor.results) == ["j0", "j1", "j2"]
    assert executor.failures == []


async def test_submit_refused_for_a_lost_lease_is_dropped_not_retried(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.refusals["j1"] = [LeaseLost("stale token")]

    await pipeline.run(locked("j1"))

    assert executor.submit_calls == 1
    assert executor.submitted == 0


async def test_submit_gives_up_once_the_lease_has_run_out(
    executor: FakeExecutor, results: ResultBatcher
) -> None:
    now = [0.0]
    pipeline = Pipeline(
        executor,
        results,
        {"probe": probe_definition(ProbeLog())}.__getitem__,
        clock=lambda: now[0],
    )
    executor.submit_errors = [ExecutorUnreachable("UNAVAILABLE") for _ in range(1000)]

    async def advance() -> None:
        while True:
            now[0] += 1.0
            await asyncio.sleep(0)

    ticker = asyncio.create_task(advance())
    try:
        await asyncio.wait_for(pipeline.run(locked("j1", ttl_ms=5000)), 5)
    finally:
        ticker.cancel()

    assert 1 <= executor.submit_calls < 20
    assert executor.submitted == 0


async def test_a_refused_result_is_reported_as_a_failure(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.refusals["j1"] = [InvalidInput("output too large")]

    await pipeline.run(locked("j1"))

    assert executor.results == []
    [failure] = executor.failures
    assert failure["error_code"] == ErrorCode.INTERNAL_ERROR
    assert failure["error_message"].startswith("the job service refused the result")


async def test_a_submit_hanging_on_one_replica_leaves_time_for_a_try_on_another(
    executor: FakeExecutor, results: ResultBatcher
) -> None:
    """A frozen replica answers no call: the try sent to it costs its whole timeout. The
    next try (the channel's next replica) must still fit in the lease."""
    now = [0.0]
    pipeline = Pipeline(
        executor, results, {"probe": probe_definition(ProbeLog())}.__getitem__, clock=lambda: now[0]
    )
    timeouts: list[float] = []

    async def call(timeout_s: float) -> str:
        timeouts.append(timeout_s)
        if len(timeouts) == 1:  # the frozen replica: no answer within the timeout
            now[0] += timeout_s
            raise ExecutorUnreachable("DEADLINE_EXCEEDED")
        return "SUCCEEDED"

    assert await pipeline._retrying(4.0, call) == "SUCCEEDED"
    assert timeouts[0] <= 2.0, "the first try took the whole lease"
    assert len(timeouts) == 2
