"""Retention (seed 003 §6) against real PostgreSQL: finished jobs past their retention go
with everything they own, their usage survives as daily totals, a parent outlives its
children, replicas share the work, and past quota counters are pruned."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import asyncpg
import pytest

from job_service.adapters.postgres.pool import create_pool
from job_service.adapters.postgres.retention import RetentionRepository
from job_service.usecases.retention import Retention
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.registry import Registry, default_registry
from tests.support.ai import FEYNMAN_INPUT, worker_result
from tests.support.stack import Client

DAY = 24 * 3600.0


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, 4)
    try:
        yield pool
    finally:
        await pool.close()


def retention(pool: asyncpg.Pool, registry: Registry | None = None, batch: int = 500) -> Retention:
    return Retention(
        registry or default_registry(),
        RetentionRepository(pool),
        job_retention_s=30 * DAY,
        usage_retention_s=0,
        batch=batch,
    )


async def age(db: asyncpg.Connection, job_id: str, days: int) -> None:
    await db.execute(
        "UPDATE jobs SET finished_at = now() - $2 * interval '1 day' WHERE id = $1", job_id, days
    )


async def rows_of(db: asyncpg.Connection, job_id: str) -> dict[str, int]:
    counts = {}
    for table in ("jobs", "job_events", "job_artifacts", "job_snapshots", "usage_logs"):
        column = "id" if table == "jobs" else "job_id"
        counts[table] = await db.fetchval(
            f"SELECT count(*) FROM {table} WHERE {column} = $1", job_id
        )
    counts["outbox_events"] = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE aggregate_id = $1", job_id
    )
    return counts


async def test_finished_jobs_past_retention_go_with_all_they_own_and_usage_stays_billed(
    client: Client, db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    locked = (await client.lock(parent.id)).job
    await client.executor.SubmitResult(await worker_result(locked))
    [child_id] = (await client.get(parent.id)).child_job_ids
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=child_id, user_id="user-1"))
    recent = (await client.create(sleep_ms=1)).job.id  # waiting: never deleted
    await db.execute(  # a dead domain event of the parent goes with it
        "UPDATE outbox_events SET status = 'dead' WHERE aggregate_id = $1", parent.id
    )
    before = await rows_of(db, parent.id)
    assert before["job_events"] and before["job_artifacts"] and before["usage_logs"]
    await age(db, parent.id, 31)
    await age(db, child_id, 31)

    # one round takes the child; its parent waits for it, then goes in the next round
    await retention(pool).run_round()
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE id = $1", child_id) == 0
    assert (await rows_of(db, parent.id))["jobs"] == 1
    await retention(pool).run_round()

    assert set((await rows_of(db, parent.id)).values()) == {0}
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", recent) == "queued"
    billed = await db.fetch(
        "SELECT user_id, provider, model, calls, input_tokens, output_tokens, cost_usd::float8"
        " FROM usage_daily"
    )
    assert [tuple(r) for r in billed] == [
        ("user-1", "fake", "fake-primary", 1, 120, 40, pytest.approx(0.0012))
    ]


async def test_jobs_within_retention_and_unfinished_jobs_are_kept(
    client: Client, db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    young = (await client.create(sleep_ms=1)).job.id
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=young, user_id="user-1"))
    await age(db, young, 29)
    waiting = (await client.create(sleep_ms=1)).job.id
    await db.execute(
        "UPDATE jobs SET created_at = now() - interval '1 year' WHERE id = $1", waiting
    )

    assert await retention(pool).run_round() == 0

    assert await db.fetchval("SELECT count(*) FROM jobs") == 2


async def test_a_definition_retention_overrides_the_default_and_zero_keeps_forever(
    client: Client, db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    job = (await client.create(sleep_ms=1)).job.id
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job, user_id="user-1"))
    await age(db, job, 400)
    forever = Registry(
        dataclasses.replace(d, retention_s=0) if d.job_type == "synthetic" else d
        for d in default_registry()
    )

    assert "synthetic" not in retention(pool, forever).policies()
    assert await retention(pool, forever).run_round() == 0
    short = Registry(
        dataclasses.replace(d, retention_s=3600.0) if d.job_type == "synthetic" else d
        for d in default_registry()
    )
    await age(db, job, 1)
    assert await retention(pool, short).run_round() == 1


async def test_replicas_share_the_retention_work_and_delete_each_job_once(
    db: asyncpg.Connection, pool: asyncpg.Pool, database_url: str
) -> None:
    # Three replicas over small batches of the same 100 users' jobs: they fold usage into
    # the same usage_daily rows at once, which deadlocked before those upserts took their
    # row locks in key order. Three passes, as a deadlock needs an unlucky interleaving.
    others = [await create_pool(database_url, 2) for _ in range(2)]
    try:
        for _ in range(3):
            await insert_finished_jobs(db, 3000)
            counts = await asyncio.gather(
                *(retention(p, batch=50).run_round() for p in (pool, *others))
            )
            assert sum(counts) == 3000
            assert sum(1 for count in counts if count) >= 2  # shared, not one replica's
            assert await db.fetchval("SELECT count(*) FROM jobs") == 0
    finally:
        for other in others:
            await other.close()

    assert await db.fetchval("SELECT sum(calls) FROM usage_daily") == 9000  # every call billed


async def test_quota_counters_of_past_days_are_pruned(
    db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    await db.execute(
        "INSERT INTO job_quota_usage (user_id, day, created) SELECT 'u' || d, "
        "(now() AT TIME ZONE 'UTC')::date - d, 1 FROM generate_series(0, 9) d"
    )

    await retention(pool).run_round()

    kept = await db.fetch("SELECT user_id FROM job_quota_usage ORDER BY user_id")
    assert [r["user_id"] for r in kept] == ["u0", "u1"]  # today and yesterday


async def insert_finished_jobs(db: asyncpg.Connection, n: int, days_ago: int = 100) -> None:
    """``n`` succeeded synthetic jobs finished ``days_ago`` days ago, each with a snapshot,
    two timeline events and a usage row, in four INSERT ... SELECT statements."""
    await db.execute(
        """
        INSERT INTO jobs (user_id, job_type, queue, request_hash, status, max_attempts,
                          timeout_ms, input_schema_version, output_schema_version,
                          definition_version, validated_output, output_hash, created_at,
                          finished_at)
        SELECT 'user-' || (g % 100), 'synthetic', 'ai-interactive', md5(g::text), 'succeeded',
               3, 1000, '1', '1', '1.0.0', '{"attempt": 1, "data": "x"}', md5(g::text),
               now() - ($2 + 1) * interval '1 day' + g * interval '1 millisecond',
               now() - $2 * interval '1 day' + g * interval '1 millisecond'
        FROM generate_series(1, $1) g
        """,
        n,
        days_ago,
    )
    await db.execute(
        "INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version)"
        " SELECT id, '{}', 'h', '1' FROM jobs WHERE job_type = 'synthetic'"
    )
    await db.execute(
        "INSERT INTO job_events (job_id, from_status, to_status, attempt)"
        " SELECT id, s.f, s.t, 1 FROM jobs,"
        " (VALUES ('queued', 'running'), ('running', 'succeeded')) s(f, t)"
    )
    await db.execute(
        "INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode,"
        " input_tokens, output_tokens, cost_usd, created_at)"
        " SELECT id, 1, 'fake', 'fake-primary', 'platform', 10, 5, 0.001, finished_at"
        " FROM jobs"
    )


async def test_children_of_a_job_stay_linked_until_they_are_deleted(
    client: Client, db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    locked = (await client.lock(parent.id)).job
    await client.executor.SubmitResult(await worker_result(locked))
    [child_id] = (await client.get(parent.id)).child_job_ids
    await age(db, parent.id, 365)

    await retention(pool).run_round()

    # the child still waits: its parent is kept and the link holds
    child = await client.get(child_id)
    assert child.parent_job_id == parent.id
    assert child.status == job_pb2.JOB_STATUS_QUEUED
