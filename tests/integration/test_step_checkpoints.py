"""Checkpointed provider calls (issue 19) against the real job service and PostgreSQL: a
worker records each call's response as a named step, fenced by the lease, before its
attempt goes on; the next attempt reuses it instead of calling again (its usage row costs
nothing and is marked reused), unless the response failed validation; a two-step job
resumes at its first unfinished step; recorded responses go with their job and never into
a log."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import grpc
import pytest

from job_service.adapters.postgres.pool import create_pool
from job_service.adapters.postgres.retention import RetentionRepository
from job_service.usecases.retention import Retention
from shared.ai.provider import ModelTier, ProviderRequest, ProviderResponse
from shared.errors import LeaseLost
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.registry import Registry, default_registry
from shared.rpc_errors import error_from_rpc
from tests.support.ai import FEYNMAN_INPUT
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.wait import eventually
from worker_service.adapters.fake_provider import FakeProvider
from worker_service.adapters.grpc_executor import GrpcExecutorClient
from worker_service.domain.model import LockedJob, LockOutcome, ResultSubmission
from worker_service.gateway import ModelGateway
from worker_service.model_router import ModelRouter, PriceTable, Route
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher

REGISTRY: Registry = default_registry({"JOBS_JOB_TYPE_MODULES": "tests.support.step_jobtypes"})
# A phrase only the model's answers carry (the fake provider echoes the topic).
MARKER = "Quokka-Checkpoint-5d1e"
TWO_STEP_INPUT = {"topic": MARKER, "text": "Photosynthesis converts sunlight into sugar."}
PRICES = PriceTable({"fake-primary": (1.0, 2.0), "fake-cheap": (0.5, 1.0)})


class CountingProvider(FakeProvider):
    """The fake provider, keeping the prompt of each call it answered."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        self.prompts.append(request.prompt_key)
        return await super().generate(request)


class RefusingSink:
    """A result sink whose job service refuses every result (as if the lease was lost
    right after the provider answered): the attempt ends without committing anything."""

    async def submit(self, submission: ResultSubmission, *, timeout_s: float) -> str:
        raise LeaseLost("refused for the test")


@dataclass
class Worker:
    executor: GrpcExecutorClient
    provider: CountingProvider
    gateway: ModelGateway

    async def lock(self, job_id: str) -> LockedJob:
        [answer] = await self.executor.lock_jobs([job_id], "worker-t", timeout_s=5)
        assert not isinstance(answer, Exception) and answer.outcome is LockOutcome.LOCKED
        assert answer.job is not None
        return answer.job

    async def run(self, job: LockedJob, *, commit: bool = True) -> None:
        async with ResultBatcher(self.executor) as batcher:
            sink = batcher if commit else RefusingSink()
            pipeline = Pipeline(self.executor, sink, REGISTRY.get, gateway=self.gateway)
            await pipeline.run(job)


@pytest.fixture
async def target(database_url: str, nats_url: str) -> AsyncIterator[str]:
    """A job service that knows the two-step job type."""
    async with running_job_service(database_url, nats_url, REGISTRY) as app:
        yield f"127.0.0.1:{app.port}"


@pytest.fixture
async def worker(target: str) -> AsyncIterator[Worker]:
    """The worker's pipeline in this process, on the fake provider."""
    provider = CountingProvider()
    router = ModelRouter(
        {tier: Route(provider, f"fake-{tier.value}") for tier in ModelTier}, PRICES
    )
    async with open_channel(target) as channel:
        yield Worker(GrpcExecutorClient(channel), provider, ModelGateway(router))


async def retry_now(db: asyncpg.Connection, job_id: str) -> None:
    """End the running attempt as a lost lease does, and make the retry due at once."""
    await db.execute("UPDATE jobs SET lock_until = now() - interval '1 s' WHERE id = $1", job_id)
    await eventually(
        lambda: db.fetchval("SELECT status = 'retrying' FROM jobs WHERE id = $1", job_id),
        timeout=10,
        message="the lease was not reaped",
    )
    await db.execute("UPDATE jobs SET next_run_at = now() WHERE id = $1", job_id)


async def usage(db: asyncpg.Connection, job_id: str) -> list[tuple[int, bool, bool]]:
    """(attempt, reused, cost > 0) of each usage row of the job, in order."""
    rows = await db.fetch(
        "SELECT attempt, reused, cost_usd > 0 AS paid FROM usage_logs WHERE job_id = $1"
        " ORDER BY attempt, id",
        job_id,
    )
    return [(r["attempt"], r["reused"], r["paid"]) for r in rows]


def step_request(
    job_id: str, token: str, step: str = "answer", text: str = '{"a": 1}', **usage: Any
) -> epb.RecordStepRequest:
    return epb.RecordStepRequest(
        job_id=job_id,
        lease_token=token,
        step=step,
        response=epb.StepResponse(
            text=text, parsed_json=text, model="fake-primary", provider="fake"
        ),
        usage=epb.ProviderUsage(
            provider="fake",
            model="fake-primary",
            credential_mode="platform",
            input_tokens=10,
            output_tokens=5,
            cost_usd=0.02,
            call_id=usage.get("call_id", str(uuid.uuid4())),
        ),
    )


async def test_a_call_recorded_by_a_failed_attempt_is_reused_not_paid_again(
    client: Client, db: asyncpg.Connection, worker: Worker
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    await worker.run(await worker.lock(job.id), commit=False)  # called, recorded, lost
    assert len(worker.provider.prompts) == 1
    assert await db.fetchval("SELECT count(*) FROM job_steps WHERE job_id = $1", job.id) == 1
    await retry_now(db, job.id)

    second = await worker.lock(job.id)
    assert [s.step for s in second.recorded_steps] == ["answer"]
    await worker.run(second)

    assert (await client.get(job.id)).status == job_pb2.JOB_STATUS_SUCCEEDED
    assert len(worker.provider.prompts) == 1  # the second attempt made no call
    assert await usage(db, job.id) == [(1, False, True), (2, True, False)]
    assert (await client.get(job.id)).total_cost_usd > 0  # the one call, billed once


async def test_a_recorded_response_that_fails_validation_is_called_again_with_a_repair(
    client: Client, db: asyncpg.Connection, worker: Worker
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    first = await worker.lock(job.id)
    # the first attempt recorded an answer the output model refuses, then died
    await client.executor.RecordStep(step_request(job.id, first.lease_token, text='{"no": 1}'))
    await retry_now(db, job.id)

    await worker.run(await worker.lock(job.id))

    assert (await client.get(job.id)).status == job_pb2.JOB_STATUS_SUCCEEDED
    assert worker.provider.prompts == ["feynman-evaluation"]  # the repair call
    step = await db.fetchrow(
        "SELECT attempt, response_parsed FROM job_steps WHERE job_id = $1", job.id
    )
    assert step["attempt"] == 2 and "score" in json.loads(step["response_parsed"])  # repaired
    assert await usage(db, job.id) == [(1, False, True), (2, False, True), (2, True, False)]


async def test_a_two_step_job_resumes_at_its_first_unfinished_step(
    client: Client, db: asyncpg.Connection, worker: Worker
) -> None:
    job = (await client.create(job_type="two_step", **TWO_STEP_INPUT)).job
    first = await worker.lock(job.id)
    # the first attempt got as far as recording step one
    points = '{"points": ["photosynthesis", "sunlight"]}'
    await client.executor.RecordStep(step_request(job.id, first.lease_token, "evaluate", points))
    await retry_now(db, job.id)

    await worker.run(await worker.lock(job.id))

    done = await client.get(job.id)
    assert done.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert worker.provider.prompts == ["two-step-summarise"]  # step one was not called again
    assert done.output["points"] == ["photosynthesis", "sunlight"]  # the recorded answer
    steps = await db.fetch(
        "SELECT step, attempt FROM job_steps WHERE job_id = $1 ORDER BY step", job.id
    )
    assert [(s["step"], s["attempt"]) for s in steps] == [("evaluate", 1), ("summarise", 2)]


async def test_record_step_with_a_stale_lease_is_refused_and_writes_nothing(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    stale = (await client.lock(job.id)).job.lease_token
    await retry_now(db, job.id)
    current = (await client.lock(job.id)).job.lease_token

    for token in (stale, str(uuid.uuid4())):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client.executor.RecordStep(step_request(job.id, token))
        assert raised.value.code() is grpc.StatusCode.ABORTED
        assert isinstance(error_from_rpc(raised.value), LeaseLost)
    assert await db.fetchval("SELECT count(*) FROM job_steps") == 0
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == 0

    answer = await client.executor.RecordStep(step_request(job.id, current))
    assert answer.attempt == 2


async def test_recording_a_step_twice_keeps_one_step_and_one_usage_row_per_call(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    token = (await client.lock(job.id)).job.lease_token
    call_id = str(uuid.uuid4())

    await client.executor.RecordStep(step_request(job.id, token, call_id=call_id))
    await client.executor.RecordStep(step_request(job.id, token, call_id=call_id))  # a retry
    await client.executor.RecordStep(step_request(job.id, token, text='{"b": 2}'))  # a repair

    steps = await db.fetch("SELECT response_parsed FROM job_steps WHERE job_id = $1", job.id)
    assert [json.loads(s["response_parsed"]) for s in steps] == [{"b": 2}]
    assert await db.fetchval("SELECT count(*) FROM usage_logs WHERE job_id = $1", job.id) == 2


async def test_recorded_steps_go_with_their_job_and_reused_calls_are_not_billed_as_calls(
    client: Client, db: asyncpg.Connection, worker: Worker, database_url: str
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    await worker.run(await worker.lock(job.id), commit=False)
    await retry_now(db, job.id)
    await worker.run(await worker.lock(job.id))
    assert await db.fetchval("SELECT count(*) FROM job_steps WHERE job_id = $1", job.id) == 1
    [child] = (await client.get(job.id)).child_job_ids
    await db.execute(
        "UPDATE jobs SET status = 'cancelled', finished_at = now() - interval '40 days'"
        " WHERE id = ANY($1::uuid[])",
        [job.id, child],
    )

    pool = await create_pool(database_url, 2)
    try:
        retention = Retention(
            REGISTRY,
            RetentionRepository(pool),
            job_retention_s=86400.0,
            usage_retention_s=0,
            batch=100,
        )
        for _ in range(2):  # a parent goes once its child has gone
            await retention.run_round()
    finally:
        await pool.close()

    assert await db.fetchval("SELECT count(*) FROM job_steps") == 0
    daily = await db.fetchrow("SELECT sum(calls) AS calls, sum(cost_usd) AS cost FROM usage_daily")
    assert daily["calls"] == 1 and daily["cost"] > 0  # two usage rows, one call


async def test_recorded_responses_never_reach_the_logs(
    client: Client, db: asyncpg.Connection, worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    job = (await client.create(job_type="two_step", **TWO_STEP_INPUT)).job
    await worker.run(await worker.lock(job.id), commit=False)
    await retry_now(db, job.id)
    await worker.run(await worker.lock(job.id))

    assert (await client.get(job.id)).status == job_pb2.JOB_STATUS_SUCCEEDED
    recorded = await db.fetch("SELECT response_text FROM job_steps WHERE job_id = $1", job.id)
    assert len(recorded) == 2
    assert MARKER in " ".join(r["response_text"] for r in recorded)  # the summary has it
    assert "reuses the response" in caplog.text  # the reuse is logged, by name only
    assert MARKER not in caplog.text
    assert "photosynthesis" not in caplog.text.lower()
