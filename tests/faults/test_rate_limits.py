"""Fleet-wide provider rate limits end to end: four workers on two job_service replicas
call the local OpenAI-compatible server, and the server's own record of when requests
arrived is what is judged — requests per second within the limit plus its burst (jobs of
one call, and jobs of several: steps and repairs), tokens per minute near the limit,
nothing sent during a 429's Retry-After on the tier that got it and only there, and the
rate cut still in force when the block ends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import asyncpg
import pytest

from devstack.openai_server import LocalOpenAIServer, Reply, fake_responder
from job_service.domain.rate_limits import CALL_CONFIRM_LEAD_S, DEFAULT_CALL_SLACK_S
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import Registry, default_registry
from tests.support.ai import FEYNMAN_INPUT
from tests.support.stack import Client, open_channel, running_job_service, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp
from worker_service.model_router import ModelSettings

PRIMARY = "big-model"
# How long after a 429 a call confirmed just before its report may still start (ADR 0002,
# rate limits at the call): the confirmation's lead, the slot's slack, and the report's
# own trip to the database.
UNDER_WAY_S = CALL_CONFIRM_LEAD_S + DEFAULT_CALL_SLACK_S + 0.05
CHEAP = "small-model"
# two_step (two primary calls) and two_tier (a cheap call, then a primary one)
STEP_REGISTRY: Registry = default_registry({"JOBS_JOB_TYPE_MODULES": "tests.support.step_jobtypes"})
STEP_INPUT = {"topic": "Photosynthesis", "text": "Plants convert sunlight into sugar."}


@pytest.fixture
async def openai_server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer() as server:
        yield server


@asynccontextmanager
async def fleet(
    database_url: str,
    nats_url: str,
    server: LocalOpenAIServer,
    limits: dict[str, Any],
    registry: Registry | None = None,
    **overrides: Any,
) -> AsyncIterator[Client]:
    """Two job_service replicas sharing the limits, two workers on each."""
    models = ModelSettings(
        model_primary_provider="openai",
        model_primary_base_url=server.url,
        model_primary_model=PRIMARY,
        model_primary_api_key="sk-test-primary-0123456789",
        model_cheap_provider="openai",
        model_cheap_base_url=server.url,
        model_cheap_model="small-model",
        model_cheap_api_key="sk-test-cheap-0123456789",
    )
    settings = {
        "rate_limits": json.dumps(limits),
        "max_active_jobs_per_user": 0,
        "daily_job_quota_per_user": 0,
        **overrides,
    }
    async with AsyncExitStack() as stack:
        replicas = [
            await stack.enter_async_context(
                running_job_service(database_url, nats_url, registry, **settings)
            )
            for _ in range(2)
        ]
        for n in range(4):
            target = f"127.0.0.1:{replicas[n % 2].port}"
            await stack.enter_async_context(
                WorkerApp(
                    worker_settings(nats_url, target, worker_id=f"w{n}"),
                    registry=registry,
                    models=models,
                )
            )
        channel = await stack.enter_async_context(open_channel(f"127.0.0.1:{replicas[0].port}"))
        yield Client(channel)


async def create_evaluations(client: Client, count: int) -> list[str]:
    ids = []
    for n in range(count):
        response = await client.jobs.CreateJob(
            jpb.CreateJobRequest(
                user_id=f"u{n % 5}",
                job_type="feynman_evaluation",
                input=struct_from_dict(FEYNMAN_INPUT),
            )
        )
        ids.append(response.job.id)
    return ids


async def all_succeeded(db: asyncpg.Connection, ids: list[str]) -> bool:
    done = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE id = ANY($1::text[]::uuid[]) AND status = 'succeeded'",
        ids,
    )
    return bool(done == len(ids))


def busiest_second(times: list[float]) -> int:
    """The most requests that arrived within any one-second window."""
    return busiest(times, 1.0)


async def test_requests_per_second_stay_within_the_limit_and_its_burst(
    database_url: str, nats_url: str, db: asyncpg.Connection, openai_server: LocalOpenAIServer
) -> None:
    rate, burst = 5.0, 2  # 300 requests a minute
    limits = {"primary": {"requests_per_minute": rate * 60, "burst_requests": burst}}
    async with fleet(database_url, nats_url, openai_server, limits) as client:
        ids = await create_evaluations(client, 30)
        await eventually(lambda: all_succeeded(db, ids), timeout=60, interval=0.2)

    primary = [r.at for r in openai_server.requests if r.body.get("model") == PRIMARY]
    assert len(primary) == 30
    print(f"requests: busiest second {busiest_second(primary)} (limit {rate} + burst {burst})")
    assert busiest_second(primary) <= rate + burst, busiest_second(primary)
    # the limit, not the fleet, set the pace: 30 requests at 5/s after a burst of 2
    assert max(primary) - min(primary) >= (30 - burst) / rate - 1


async def test_tokens_per_minute_track_the_limit(
    database_url: str, nats_url: str, db: asyncpg.Connection, openai_server: LocalOpenAIServer
) -> None:
    tpm, burst = 36_000.0, 1_500.0  # 600 tokens a second, 2.5 s of burst
    limits = {
        "primary": {
            "requests_per_minute": 6000,
            "tokens_per_minute": tpm,
            "burst_tokens": burst,
        }
    }
    async with fleet(database_url, nats_url, openai_server, limits) as client:
        ids = await create_evaluations(client, 24)
        await eventually(lambda: all_succeeded(db, ids), timeout=90, interval=0.2)

    rows = await db.fetch(
        "SELECT extract(epoch FROM created_at)::float8 AS at, input_tokens + output_tokens AS n"
        " FROM usage_logs WHERE model = $1 ORDER BY created_at",
        PRIMARY,
    )
    used = sum(r["n"] for r in rows)
    span = rows[-1]["at"] - rows[0]["at"]
    allowed = tpm / 60 * span + burst
    print(f"tokens: {used} in {span:.1f} s = {used / allowed:.2f} of the limit plus burst")
    assert used <= allowed * 1.1, (used, allowed)
    assert used >= allowed * 0.6, (used, allowed)  # the budget is used, not wasted


async def test_a_429_stops_every_worker_until_its_retry_after_then_recovers(
    database_url: str, nats_url: str, db: asyncpg.Connection, openai_server: LocalOpenAIServer
) -> None:
    limits = {"primary": {"requests_per_minute": 600, "burst_requests": 2}}
    async with fleet(database_url, nats_url, openai_server, limits) as client:
        first = await create_evaluations(client, 5)
        await eventually(lambda: all_succeeded(db, first), timeout=30, interval=0.1)
        # their review-card children too: the next request must be a primary-tier one
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) = 0 FROM jobs WHERE status NOT IN ('succeeded', 'failed')"
            ),
            timeout=30,
        )
        throttled_at = len(openai_server.requests)
        openai_server.script(Reply(status=429, headers={"Retry-After": "2"}))
        rest = await create_evaluations(client, 20)
        await eventually(lambda: all_succeeded(db, rest), timeout=60, interval=0.2)
        limits_after = await db.fetchrow("SELECT factor, throttled_total FROM rate_limits")

    refused = openai_server.requests[throttled_at]
    assert refused.body.get("model") == PRIMARY
    later = [
        r.at - refused.at
        for r in openai_server.requests[throttled_at + 1 :]
        if r.body.get("model") == PRIMARY
    ]
    # Calls under way when the 429 came back may still arrive: one whose slot was confirmed
    # before the report starts by its slot's slack (UNDER_WAY_S); nothing is sent after
    # that until Retry-After has passed.
    early = [d for d in later if UNDER_WAY_S < d < 2.0]
    assert early == [], early
    assert len(later) >= 20 and max(later) >= 2.0  # every job ran once the wait was over
    assert limits_after["throttled_total"] == 1


def repairing_responder() -> Any:
    """The fake answers, except that every other first call of a step is answered off its
    schema (an empty JSON object): that step then makes a repair call."""
    firsts = 0

    def respond(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        nonlocal firsts
        status, answer = fake_responder(body)
        if len(body.get("messages") or []) <= 2:  # not a repair prompt
            firsts += 1
            if firsts % 2 == 1:
                answer["choices"][0]["message"]["content"] = "{}"
        return status, answer

    return respond


def busiest(times: list[float], window_s: float) -> int:
    """The most requests that arrived within any window of ``window_s``."""
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= window_s:
            start += 1
        most = max(most, end - start + 1)
    return most


async def create_steps(client: Client, job_type: str, count: int) -> list[str]:
    ids = []
    for n in range(count):
        response = await client.jobs.CreateJob(
            jpb.CreateJobRequest(
                user_id=f"u{n % 5}", job_type=job_type, input=struct_from_dict(STEP_INPUT)
            )
        )
        ids.append(response.job.id)
    return ids


async def test_every_call_of_a_job_of_several_calls_counts_against_the_limit(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """Two steps per job and a repair for every other step: 2-4 calls an attempt. A grant
    spends one request; the provider must still see the limit, counted per call."""
    rate, burst = 5.0, 2
    limits = {"primary": {"requests_per_minute": rate * 60, "burst_requests": burst}}
    async with (
        LocalOpenAIServer(repairing_responder()) as server,
        fleet(database_url, nats_url, server, limits, STEP_REGISTRY) as client,
    ):
        ids = await create_steps(client, "two_step", 12)
        await eventually(lambda: all_succeeded(db, ids), timeout=90, interval=0.2)

    calls = [r.at for r in server.requests if r.body.get("model") == PRIMARY]
    attempts = await db.fetchval(
        "SELECT sum(attempt_count) FROM jobs WHERE id = ANY($1::text[]::uuid[])", ids
    )
    assert attempts == 12  # one attempt each: the repairs were calls, not retries
    assert len(calls) == 36  # 24 steps, every other one repaired
    print(f"calls: busiest second {busiest(calls, 1.0)} (limit {rate} + burst {burst})")
    assert busiest(calls, 1.0) <= rate + burst, busiest(calls, 1.0)
    assert busiest(calls, 5.0) <= rate * 5 + burst, busiest(calls, 5.0)


async def test_a_429_blocks_the_tier_of_the_call_that_got_it_and_no_other(
    database_url: str, nats_url: str, db: asyncpg.Connection, openai_server: LocalOpenAIServer
) -> None:
    """two_tier jobs are of the primary tier, but their first call is a cheap one: a 429 on
    it blocks the cheap tier (no cheap call during the Retry-After), not the primary."""
    limits = {
        "primary": {"requests_per_minute": 600, "burst_requests": 2},
        "cheap": {"requests_per_minute": 600, "burst_requests": 2},
    }
    async with fleet(database_url, nats_url, openai_server, limits, STEP_REGISTRY) as client:
        openai_server.script(Reply(status=429, headers={"Retry-After": "3"}))
        ids = await create_steps(client, "two_tier", 6)
        await eventually(lambda: all_succeeded(db, ids), timeout=60, interval=0.2)
        throttled = dict(
            await db.fetch("SELECT key, throttled_total FROM rate_limits ORDER BY key")
        )

    refused = openai_server.requests[0]
    assert refused.body.get("model") == CHEAP
    later_cheap = [
        r.at - refused.at for r in openai_server.requests[1:] if r.body.get("model") == CHEAP
    ]
    # Calls already under way when the 429 came back may land a moment later (UNDER_WAY_S);
    # nothing is sent after its report until the Retry-After has passed.
    assert [d for d in later_cheap if UNDER_WAY_S < d < 3.0] == []
    assert throttled == {"cheap": 1, "primary": 0}


async def test_the_rate_cut_of_a_429_outlives_its_block(
    database_url: str, nats_url: str, db: asyncpg.Connection, openai_server: LocalOpenAIServer
) -> None:
    """A Retry-After as long as the recovery: when the block ends the tier runs at half
    its rate, and recovers from then on (the recovery clock starts at the block's end)."""
    limits = {"primary": {"requests_per_minute": 600, "burst_requests": 2}}
    async with fleet(
        database_url, nats_url, openai_server, limits, rate_limit_recovery_s=4
    ) as client:
        openai_server.script(Reply(status=429, headers={"Retry-After": "4"}))
        [job_id] = await create_evaluations(client, 1)
        await eventually(
            lambda: db.fetchval(
                "SELECT blocked_until IS NOT NULL FROM rate_limits WHERE key = 'primary'"
            ),
            timeout=30,
        )
        blocked_until = await db.fetchval(
            "SELECT extract(epoch FROM blocked_until) FROM rate_limits WHERE key = 'primary'"
        )
        await eventually(
            lambda: db.fetchval("SELECT now() > to_timestamp($1::float8)", blocked_until),
            timeout=10,
        )
        [state] = (await client.admin.ListRateLimits(apb.ListRateLimitsRequest())).limits
        await eventually(lambda: all_succeeded(db, [job_id]), timeout=30, interval=0.2)

    factor = state.effective_factor
    print(f"factor when the 4 s block ended: {factor:.2f}")
    assert 0.45 <= factor <= 0.75, factor  # halved, barely recovered yet
