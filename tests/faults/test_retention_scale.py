"""Retention keeps up without long locks: 100,000 finished jobs (each with a snapshot, two
timeline events and a usage row) are deleted in bounded batches while a live workload
writes to the same tables; the longest delete statement and the longest live write are
reported (run with -s to see them) and bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from job_service.adapters.postgres.pool import create_pool
from job_service.adapters.postgres.retention import RetentionRepository
from tests.integration.test_retention import insert_finished_jobs

JOBS = 100_000
BATCH = 500


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, 4)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.mark.timeout(600)
async def test_retention_deletes_100k_finished_jobs_in_short_statements(
    db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    started = time.perf_counter()
    await insert_finished_jobs(db, JOBS)
    await db.execute("ANALYZE")
    inserted_s = time.perf_counter() - started
    live = await db.fetchval(
        "INSERT INTO jobs (user_id, job_type, queue, request_hash, status, max_attempts,"
        " timeout_ms, input_schema_version, output_schema_version, definition_version)"
        " VALUES ('live', 'synthetic', 'ai-interactive', 'h', 'running', 3, 1000, '1', '1',"
        " '1.0.0') RETURNING id"
    )
    store = RetentionRepository(pool)
    done = asyncio.Event()
    live_writes: list[float] = []

    async def live_workload() -> None:
        # what a heartbeat and a timeline write do to the tables being cleaned
        async with pool.acquire() as conn:
            while not done.is_set():
                t = time.perf_counter()
                async with conn.transaction():
                    await conn.execute(
                        "UPDATE jobs SET progress = random(), updated_at = now() WHERE id = $1",
                        live,
                    )
                    await conn.execute(
                        "INSERT INTO job_events (job_id, from_status, to_status, attempt)"
                        " VALUES ($1, 'running', 'running', 1)",
                        live,
                    )
                live_writes.append(time.perf_counter() - t)

    async def delete_all() -> list[float]:
        statements = []
        try:
            while True:
                t = time.perf_counter()
                deleted = await store.delete_finished("synthetic", 30 * 24 * 3600.0, BATCH)
                statements.append(time.perf_counter() - t)
                if deleted < BATCH:
                    return statements
        finally:
            done.set()

    t0 = time.perf_counter()
    statements, _ = await asyncio.gather(delete_all(), live_workload())
    total_s = time.perf_counter() - t0

    longest, live_longest = max(statements), max(live_writes)
    print(
        f"\nretention: {JOBS} jobs inserted in {inserted_s:.1f}s; deleted in {total_s:.1f}s"
        f" ({JOBS / total_s:,.0f} jobs/s) by {len(statements)} statements of {BATCH};"
        f" longest statement {longest * 1000:.0f} ms, median"
        f" {sorted(statements)[len(statements) // 2] * 1000:.0f} ms;"
        f" {len(live_writes)} live writes meanwhile, longest {live_longest * 1000:.0f} ms"
    )
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1  # the live one
    assert await db.fetchval("SELECT count(*) FROM job_events WHERE job_id <> $1", live) == 0
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == 0
    assert await db.fetchval("SELECT sum(calls) FROM usage_daily") == JOBS
    assert longest < 2.0
    assert live_longest < 1.0
