"""A join attaches in one go (issue 43): heartbeats of its running dependencies never make
it try again, and the end of a dependency still meets the attach in either order, so the
join is released exactly once (migration 0045, vocabulary/dependencies.py's ATTACH)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from prometheus_client import REGISTRY

from job_service.app import JobServiceApp
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

S = job_pb2
WIDE = 10_000
CREATE_BATCH = 500
LOCK_BATCH = 256
USER = "user-wide"
RETRIES = "jobs_dependency_attach_retries_total"
# what a heartbeat writes (job_service/adapters/postgres/leases.py's HEARTBEAT), for many
# rows in one statement
HEARTBEAT_WRITE = """
UPDATE jobs SET lock_until = lock_until + interval '1 second', progress = progress
WHERE id = ANY($1::text[]::uuid[])
"""
# the attach's first edge insert waits for an advisory lock the test holds: the attach's
# snapshot is taken and its first dependency locked, the next not yet
PAUSE_ATTACH = """
CREATE FUNCTION test_pause_attach() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.depends_on_id = $1 THEN PERFORM pg_advisory_xact_lock_shared(43); END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_pause_attach BEFORE INSERT ON job_dependencies
FOR EACH ROW EXECUTE FUNCTION test_pause_attach();
"""


def retries() -> float:
    return REGISTRY.get_sample_value(RETRIES) or 0.0


async def create_many(client: Client, n: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, CREATE_BATCH):
        requests = [
            jpb.CreateJobRequest(
                user_id=USER, job_type="synthetic", input=struct_from_dict({"sleep_ms": 0})
            )
            for _ in range(min(CREATE_BATCH, n - start))
        ]
        answer = await client.jobs.CreateJobs(jpb.CreateJobsRequest(requests=requests))
        assert not [r for r in answer.results if r.HasField("error")]
        ids += [r.response.job.id for r in answer.results]
    return ids


async def lock_all(client: Client, job_ids: list[str]) -> None:
    for start in range(0, len(job_ids), LOCK_BATCH):
        batch = job_ids[start : start + LOCK_BATCH]
        answer = await client.executor.LockJobs(
            epb.LockJobsRequest(
                requests=[epb.LockJobRequest(job_id=j, worker_id="worker-a") for j in batch]
            )
        )
        assert {r.outcome for r in answer.responses} == {epb.LOCK_OUTCOME_LOCKED}


async def join_of(client: Client, depends_on: list[str]) -> jpb.CreateJobResponse:
    return await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id=USER,
            job_type="synthetic",
            input=struct_from_dict({"sleep_ms": 0}),
            depends_on=depends_on,
        )
    )


async def released_once(db: asyncpg.Connection, join_id: str) -> bool:
    """The resolver counted every edge and made the join due, with its one dispatch row."""
    row = await db.fetchrow(
        "SELECT status IN ('created', 'queued'), dependencies_uncounted, next_run_at <= now(),"
        " (SELECT count(*) FROM outbox_events WHERE aggregate_id = jobs.id::text"
        "  AND event_type = 'job.dispatch')"
        " FROM jobs WHERE id = $1",
        join_id,
    )
    return tuple(row) == (True, 0, True, 1)


@pytest.fixture
async def job_service(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    """One user holds every dependency: no limit on a user's unfinished jobs."""
    async with running_job_service(
        database_url, nats_url, max_active_jobs_per_user=0, daily_job_quota_per_user=0
    ) as app:
        yield app


@pytest.fixture
async def beating(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection for heartbeats held open in a transaction."""
    conn = await asyncpg.connect(database_url)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.mark.timeout(300)
async def test_a_join_over_10000_running_jobs_heartbeating_attaches_on_the_first_try(
    client: Client, db: asyncpg.Connection, beating: asyncpg.Connection
) -> None:
    deps = await create_many(client, WIDE)
    await lock_all(client, deps)
    # every dependency's heartbeat is in flight, all through the attach: each row is
    # locked as an UPDATE locks it (FOR SHARE failed on every one, every try)
    heartbeats = beating.transaction()
    await heartbeats.start()
    assert await beating.execute(HEARTBEAT_WRITE, deps) == f"UPDATE {WIDE}"
    before = retries()

    join = (await join_of(client, deps)).job
    await heartbeats.commit()

    assert retries() == before  # the first try
    assert (join.dependencies_total, join.dependencies_pending) == (WIDE, WIDE)
    # every dependency ends (one statement, as a bulk end would): the join is released once
    await db.execute(
        "UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = ANY($1::uuid[])",
        deps,
    )
    await eventually(lambda: released_once(db, join.id), timeout=30, message="not released")


async def test_a_dependency_ended_between_the_attachs_snapshot_and_its_lock_counts_as_ended(
    client: Client, db: asyncpg.Connection, beating: asyncpg.Connection
) -> None:
    """The attach reads the dependencies with the snapshot its statement started with, and
    locks them one by one after: a dependency whose end committed in between was locked at
    its stale version (running) by FOR KEY SHARE alone, and its edge waited forever."""
    first, second = sorted(await create_many(client, 2))  # locked in id order
    await lock_all(client, [first, second])
    await db.execute(PAUSE_ATTACH.replace("$1", f"'{first}'::uuid"))
    async with beating.transaction():
        await beating.execute("SELECT pg_advisory_xact_lock(43)")
        attaching = asyncio.create_task(join_of(client, [first, second]))
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ),
            message="the attach never paused",
        )
        # the second ends by a plain UPDATE (no row lock taken first), and commits
        await db.execute(
            "UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = $1", second
        )
    join = (await attaching).job
    await db.execute("DROP TRIGGER test_pause_attach ON job_dependencies")

    ended = await db.fetchval(
        "SELECT ended_status FROM job_dependencies WHERE job_id = $1 AND depends_on_id = $2",
        join.id,
        second,
    )
    assert ended == "succeeded"
    assert join.dependencies_pending == 1  # the first, still running
    await db.execute(
        "UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = $1", first
    )
    await eventually(lambda: released_once(db, join.id), timeout=15, message="not released")
