"""Held jobs cost nothing per round: the dispatch reconciler leaves a job alone while a
paused queue, a full concurrency key or the want of a worker of its version holds it — no
new token, no ``updated_at`` touch, nothing for its WatchJob watchers — and the hold's own
way back gives it a token when it lifts. Against real PostgreSQL and NATS, the reconciler
running every 0.1 s; a job nothing holds and nobody takes is the witness that rounds ran."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence

import asyncpg
import pytest

from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.constants import Queue
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.registry import Registry
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.wait import eventually

INTERACTIVE, BACKGROUND = Queue.INTERACTIVE.value, Queue.BACKGROUND.value
KEYED = dataclasses.replace(
    SYNTHETIC,
    job_type="keyed",
    queue=Queue.BACKGROUND,
    concurrency_key="user",
    concurrency_limit=1,
)
# Pinned to 1.0.0, while the background queue's only worker runs it at 0.9.0.
PINNED = dataclasses.replace(SYNTHETIC, job_type="pinned", queue=Queue.BACKGROUND)
WITNESS = dataclasses.replace(SYNTHETIC, job_type="witness", queue=Queue.BACKGROUND)
RUNS = ["keyed@1.0.0", "pinned@0.9.0", "witness@1.0.0"]
NO_JOB = "00000000-0000-0000-0000-000000000000"
PAUSED_JOBS = 5


@pytest.fixture
async def client(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    async with (
        running_job_service(
            database_url,
            nats_url,
            Registry([SYNTHETIC, KEYED, PINNED, WITNESS]),
            reconcile_after_s=0.3,
            reconcile_interval_s=0.1,
            watch_poll_interval_s=0.05,
            lease_ttl_s=600,
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Client(channel)


async def claim(client: Client, queue: str, tokens: int) -> list[str]:
    answer = await client.executor.LockJobs(
        epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=NO_JOB, worker_id="w1")] * tokens,
            queue=queue,
            runnable_definitions=RUNS if queue == BACKGROUND else [],
        )
    )
    return [a.job.job_id for a in answer.responses if a.outcome == epb.LOCK_OUTCOME_LOCKED]


async def dispatches(db: asyncpg.Connection, job_ids: Sequence[str]) -> dict[str, int]:
    rows = await db.fetch(
        "SELECT aggregate_id, count(*) AS n FROM outbox_events"
        " WHERE event_type = 'job.dispatch' AND aggregate_id = ANY($1::text[])"
        " GROUP BY aggregate_id",
        list(job_ids),
    )
    return {r["aggregate_id"]: r["n"] for r in rows}


async def touched(db: asyncpg.Connection, job_ids: Sequence[str]) -> dict[str, object]:
    rows = await db.fetch(
        "SELECT id::text AS id, updated_at FROM jobs WHERE id = ANY($1::text[]::uuid[])",
        list(job_ids),
    )
    return {r["id"]: r["updated_at"] for r in rows}


async def test_held_jobs_get_no_token_and_no_touch_per_round_and_run_once_released(
    client: Client, db: asyncpg.Connection
) -> None:
    await client.admin.PauseQueue(apb.PauseQueueRequest(queue=INTERACTIVE))
    paused = [(await client.create()).job.id for _ in range(PAUSED_JOBS)]
    assert await claim(client, BACKGROUND, 1) == []  # the worker says what it runs
    running = (await client.create(user_id="u1", job_type="keyed")).job.id
    assert await claim(client, BACKGROUND, 1) == [running]
    key_full = (await client.create(user_id="u1", job_type="keyed")).job.id
    pinned = (await client.create(job_type="pinned")).job.id
    witness = (await client.create(job_type="witness")).job.id
    held = [*paused, key_full, pinned]
    watched: list[job_pb2.Job] = []
    watch = client.jobs.WatchJob(jpb.WatchJobRequest(job_id=paused[0], user_id="user-1"))
    reader = asyncio.create_task(_collect(watch, watched))
    await eventually(lambda: len(watched) == 1, message="no first state")
    await eventually(
        lambda: db.fetchval(
            "SELECT count(*) = 0 FROM outbox_events WHERE status IN ('pending', 'processing')"
        ),
        message="the first tokens were never published",
    )
    tokens_before, touched_before = await dispatches(db, held), await touched(db, held)

    # rounds run: the witness, which nothing holds and nobody takes, is re-sent each time
    async def witness_resent_thrice() -> bool:
        return (await dispatches(db, [witness])).get(witness, 0) >= 4

    await eventually(witness_resent_thrice, timeout=20, interval=0.05)
    tokens_after, touched_after = await dispatches(db, held), await touched(db, held)
    updates = list(watched)

    assert tokens_before == dict.fromkeys(held, 1)
    assert tokens_after == tokens_before
    assert touched_after == touched_before
    assert [j.status for j in updates] == [job_pb2.JOB_STATUS_QUEUED]
    # the hold lifts: the resumed queue's jobs are re-issued tokens and run
    await client.admin.ResumeQueue(apb.ResumeQueueRequest(queue=INTERACTIVE))
    assert sorted(await claim(client, INTERACTIVE, PAUSED_JOBS + 1)) == sorted(paused)
    reader.cancel()


async def _collect(call: AsyncIterator[jpb.WatchJobResponse], into: list[job_pb2.Job]) -> None:
    async for answer in call:
        into.append(answer.job)


async def test_a_job_whose_type_no_live_worker_runs_is_still_reconciled(
    client: Client, db: asyncpg.Connection
) -> None:
    """Workers are live only while they claim: the background queue's worker being live says
    nothing of the interactive queue's, which may idle for want of the one token that was
    lost. Its job is not held back: the reconciler re-sends its token."""
    assert await claim(client, BACKGROUND, 1) == []  # a live worker, of another queue
    job = (await client.create()).job.id

    async def resent() -> bool:
        return (await dispatches(db, [job])).get(job, 0) >= 2

    assert await eventually(resent, timeout=10)
