"""Suspensions (issue 45) against the real job service and PostgreSQL: an attempt that ends
SUSPENDED_SLEEP or SUSPENDED_SIGNAL hands its attempt back and makes the job due at its
wake time (days ahead if need be, where a provider's Retry-After stops at 600 s); SendSignal
wakes a job waiting for a signal in its own statement, with a work token; a signal sent
while the attempt was ending (committed before it, seen by no one) makes the job due at
once instead of at its timeout."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from job_service.adapters.postgres.pool import create_pool
from job_service.adapters.postgres.queues import QueueRepository
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.stack import Client

DAY_MS = 86_400_000


async def suspend(
    client: Client, job_id: str, token: str, code: str, after_ms: int, seen: int = 0
) -> None:
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job_id,
            lease_token=token,
            error_code=code,
            error_message="suspended by the test",
            retry_after_ms=after_ms,
            signals_seen=seen,
        )
    )


async def signal(client: Client, job_id: str, n: int) -> None:
    await client.jobs.SendSignal(
        jpb.SendSignalRequest(
            job_id=job_id, user_id="user-1", name="go", payload=struct_from_dict({"n": n})
        )
    )


async def due_in_s(db: asyncpg.Connection, job_id: str) -> float:
    row = await db.fetchrow(
        "SELECT extract(epoch FROM next_run_at - now()) AS s, status, attempt_count"
        " FROM jobs WHERE id = $1",
        job_id,
    )
    assert (row["status"], row["attempt_count"]) == ("retrying", 0)  # the attempt handed back
    return float(row["s"])


async def test_a_sleep_is_due_at_its_wake_time_days_ahead(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    token = (await client.lock(job.id)).job.lease_token
    await suspend(client, job.id, token, "SUSPENDED_SLEEP", 3 * DAY_MS)
    assert 3 * 86_400 - 60 < await due_in_s(db, job.id) <= 3 * 86_400
    row = await db.fetchrow(
        "SELECT available_at - now() > interval '2 days' AS later FROM outbox_events"
        " WHERE dedupe_key = 'job.dispatch:' || $1 || ':retry:' || $2",
        job.id,
        token,
    )
    assert row is not None and row["later"]  # its work token waits in the outbox, not NATS


async def test_send_signal_wakes_a_waiting_job_with_a_work_token(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    token = (await client.lock(job.id)).job.lease_token
    await suspend(client, job.id, token, "SUSPENDED_SIGNAL", 60_000)
    assert await due_in_s(db, job.id) > 50

    await signal(client, job.id, 1)
    assert await due_in_s(db, job.id) <= 0
    woke = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE dedupe_key = 'job.dispatch:' || $1 || ':wake:1'",
        job.id,
    )
    assert woke == 1


async def test_a_signal_sent_while_the_attempt_ended_makes_the_job_due_at_once(
    client: Client, db: asyncpg.Connection
) -> None:
    missed, seen = (await client.create()).job, (await client.create()).job
    tokens = {j.id: (await client.lock(j.id)).job.lease_token for j in (missed, seen)}
    for job in (missed, seen):
        await signal(client, job.id, 1)  # the job is running: this wakes nothing
    # one attempt fetched no signal before it suspended; the other had seen seq 1
    await suspend(client, missed.id, tokens[missed.id], "SUSPENDED_SIGNAL", 60_000, seen=0)
    await suspend(client, seen.id, tokens[seen.id], "SUSPENDED_SIGNAL", 60_000, seen=1)
    assert await due_in_s(db, missed.id) <= 0
    assert await due_in_s(db, seen.id) > 50


async def test_a_provider_retry_after_is_still_capped_at_600_s(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    token = (await client.lock(job.id)).job.lease_token
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id,
            lease_token=token,
            error_code="PROVIDER_RATE_LIMITED",
            retry_after_ms=3 * DAY_MS,
        )
    )
    next_run_at: datetime = await db.fetchval("SELECT next_run_at FROM jobs WHERE id = $1", job.id)
    now: datetime = await db.fetchval("SELECT now()")
    assert (next_run_at - now).total_seconds() <= 600


async def test_an_operator_sees_what_a_sleeping_or_waiting_job_waits_for_and_until_when(
    client: Client, db: asyncpg.Connection
) -> None:
    holds = {}
    for code in ("SUSPENDED_SLEEP", "SUSPENDED_SIGNAL"):
        job = (await client.create()).job
        token = (await client.lock(job.id)).job.lease_token
        await suspend(client, job.id, token, code, 3_600_000)
        shown = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job
        next_run_at: datetime = await db.fetchval(
            "SELECT next_run_at FROM jobs WHERE id = $1", job.id
        )
        assert shown.hold.until.ToDatetime(tzinfo=UTC) == next_run_at
        holds[code] = shown.hold.reason
    assert holds == {
        "SUSPENDED_SLEEP": job_pb2.JobHold.REASON_SLEEPING,
        "SUSPENDED_SIGNAL": job_pb2.JobHold.REASON_WAITING_FOR_SIGNAL,
    }


async def test_the_suspended_gauge_counts_sleepers_and_waiters_not_yet_due(
    client: Client, db: asyncpg.Connection, database_url: str
) -> None:
    codes = ["SUSPENDED_SLEEP", "SUSPENDED_SLEEP", "SUSPENDED_SIGNAL", "PROVIDER_TIMEOUT"]
    for code in codes:
        job = (await client.create()).job
        token = (await client.lock(job.id)).job.lease_token
        await suspend(client, job.id, token, code, 3_600_000)
    woken = (await client.create()).job
    token = (await client.lock(woken.id)).job.lease_token
    await suspend(client, woken.id, token, "SUSPENDED_SIGNAL", 3_600_000)
    await signal(client, woken.id, 1)  # due now: counted with the due jobs

    pool = await create_pool(database_url, 1)
    try:
        counts = await QueueRepository(pool, {}).suspended()
    finally:
        await pool.close()
    assert counts == {"SUSPENDED_SLEEP": 2, "SUSPENDED_SIGNAL": 1}
