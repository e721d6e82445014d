"""Every provider call is billed (seed 000 §5.7): when an attempt's outcome cannot be
committed — its lease was lost while it ran, or SubmitResult/SubmitFailure answered
LEASE_LOST — the worker reports the attempt's calls through ReportUsage, named by the
attempt's lease token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shared.ai.provider import UsageRecord
from shared.errors import ErrorCode, ExecutionError, LeaseLost
from shared.registry import JobDefinition, JobResult
from worker_service.domain.model import HeartbeatReply
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher

from .fakes import FakeExecutor, ProbeInput, ProbeOutput, locked

CALL = UsageRecord("fake", "fake-primary", "platform", 10, 5, 0.001, 3, "", "call-1")


def billed_definition() -> JobDefinition:
    """A job that makes one (billed) provider call, then behaves as its input says."""

    async def execute(job_input: ProbeInput, ctx: Any) -> JobResult:
        ctx.usage.append(CALL)  # what the gateway records for a call
        if job_input.mode == "hang":
            await asyncio.Event().wait()
        if job_input.mode == "error":
            raise ExecutionError(ErrorCode.PROVIDER_UNAVAILABLE, "503")
        return JobResult(output=ProbeOutput(value=1, label="x"))

    return JobDefinition(
        job_type="probe",
        label="Probe",
        domain="testing",
        version="1",
        queue="ai-interactive",
        input_model=ProbeInput,
        output_model=ProbeOutput,
        execute=execute,
        timeout_s=30,
        concurrency=4,
    )


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
async def pipeline(executor: FakeExecutor) -> AsyncIterator[Pipeline]:
    async with ResultBatcher(executor) as batcher:
        yield Pipeline(executor, batcher, {"probe": billed_definition()}.__getitem__)


async def test_usage_of_a_result_refused_as_lease_lost_is_reported(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.refusals["j1"] = [LeaseLost("stale token")]

    await pipeline.run(locked("j1"))

    assert executor.results == []
    assert executor.usage_reports == [("j1", "token-j1-1", [CALL])]


async def test_usage_of_a_failure_refused_as_lease_lost_is_reported(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.submit_errors = [LeaseLost("stale token")]

    await pipeline.run(locked("j1", mode="error"))

    assert executor.failures == []
    assert executor.usage_reports == [("j1", "token-j1-1", [CALL])]


async def test_usage_of_an_attempt_stopped_by_a_lost_lease_is_reported(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    def lost(n: int) -> HeartbeatReply:
        raise LeaseLost("lease lost")

    executor.on_heartbeat = lost

    await asyncio.wait_for(pipeline.run(locked("j1", heartbeat_ms=10, mode="hang")), 5)

    assert executor.submit_calls == 0  # no outcome: another worker owns the job
    assert executor.usage_reports == [("j1", "token-j1-1", [CALL])]


async def test_usage_committed_with_its_outcome_is_not_reported_again(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    await pipeline.run(locked("j1"))

    assert len(executor.results) == 1
    assert executor.usage_reports == []
