"""Workers as separate processes, killed, paused and terminated mid-job: the job still
ends exactly once, on the database's word."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest

from job_service.app import JobServiceApp
from shared.pb.jobs.v1 import job_pb2
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

S = job_pb2
SpawnWorker = Callable[..., WorkerProcess]

# make run's lease settings (job_service.settings): the lease cannot end a killed worker's
# job before the reconnect grace (1 s by default since issue 43) does
SHIPPED_LEASES = {"lease_ttl_s": 5.0, "heartbeat_interval_s": 1.0, "reaper_interval_s": 1.0}
# the grace, the reaper's wake-up and a loaded machine's slack
RERUN_BOUND_S = 2.0


@pytest.fixture
async def job_service(
    request: pytest.FixtureRequest, database_url: str, nats_url: str
) -> AsyncIterator[JobServiceApp]:
    """The short leases of tests.support.stack.FAST unless a test asks for others."""
    overrides: dict[str, Any] = getattr(request, "param", {})
    async with running_job_service(database_url, nats_url, **overrides) as app:
        yield app


async def running_on(db: asyncpg.Connection, worker_id: str) -> bool:
    return bool(
        await db.fetchval(
            "SELECT count(*) FROM jobs WHERE status = 'running' AND locked_by = $1", worker_id
        )
    )


async def succeeded(db: asyncpg.Connection) -> asyncpg.Record | None:
    return await db.fetchrow(
        "SELECT id::text, attempt_count, locked_by, validated_output FROM jobs"
        " WHERE status = 'succeeded'"
    )


@pytest.mark.parametrize("job_service", [SHIPPED_LEASES], indirect=True)
async def test_a_killed_workers_job_is_retried_on_another_worker(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    doomed = spawn_worker("doomed")
    created = await client.create(sleep_ms=60_000)  # would outlive the test
    await eventually(lambda: running_on(db, "doomed"), timeout=15, message="never started")
    await db.execute("UPDATE jobs SET validated_output = NULL")  # nothing up our sleeve

    killed_at = await db.fetchval("SELECT clock_timestamp()")
    doomed.signal(signal.SIGKILL)
    await doomed.wait(5)
    # the job was made shorter only in its snapshot: the retry finishes quickly
    await db.execute("UPDATE job_snapshots SET payload = jsonb_set(payload, '{sleep_ms}', '10')")
    spawn_worker("survivor")

    row = await eventually(lambda: succeeded(db), timeout=20, message="the job was not retried")

    assert row["id"] == created.job.id
    assert row["attempt_count"] == 2
    assert row["locked_by"] == "survivor"
    events = await db.fetch("SELECT to_status, reason, worker_id FROM job_events ORDER BY id")
    assert [(e["to_status"], e["reason"]) for e in events] == [
        ("queued", None),
        ("running", None),
        # no process reopened its session within the reconnect grace: ended then, not
        # when the lease ran out (ADR 0003; a restarted worker ends it at once,
        # tests/faults/test_worker_incarnations.py)
        ("retrying", "WORKER_DISCONNECTED"),
        ("running", None),
        ("succeeded", None),
    ]
    ended_after = await db.fetchval(
        "SELECT extract(epoch FROM created_at - $1) FROM job_events WHERE to_status = 'retrying'",
        killed_at,
    )
    assert float(ended_after) < RERUN_BOUND_S, f"ended {ended_after}s after the kill"


async def test_a_paused_worker_past_its_lease_cannot_submit(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    paused = spawn_worker("paused")
    created = await client.create(sleep_ms=2500)
    await eventually(lambda: running_on(db, "paused"), timeout=15, message="never started")

    paused.signal(signal.SIGSTOP)
    spawn_worker("other")
    row = await eventually(
        lambda: succeeded(db), timeout=25, message="the other worker did not finish the job"
    )
    paused.signal(signal.SIGCONT)

    assert row["id"] == created.job.id
    assert row["locked_by"] == "other"
    assert row["attempt_count"] == 2
    # the resumed worker learns its lease is gone and drops its result
    await eventually(
        lambda: "lease" in paused.log().lower(),
        timeout=10,
        message="the paused worker never noticed its lost lease",
    )
    job = await client.get(created.job.id)
    assert job.status == S.JOB_STATUS_SUCCEEDED
    assert dict(job.output)["attempt"] == 2  # the other worker's result, applied once
    assert [a.payload["attempt"] for a in job.artifacts] == [2]
    assert [e.to_status for e in job.events].count(S.JOB_STATUS_SUCCEEDED) == 1


async def test_sigterm_lets_in_flight_jobs_finish_and_exits_zero(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    worker = spawn_worker("rolling", JOBS_WORKER_SHUTDOWN_GRACE_S="20")
    created = await client.create(sleep_ms=1500)
    await eventually(lambda: running_on(db, "rolling"), timeout=15, message="never started")

    worker.signal(signal.SIGTERM)

    assert await worker.wait(25) == 0
    job = await client.get(created.job.id)
    assert job.status == S.JOB_STATUS_SUCCEEDED
    assert job.attempt_count == 1


async def test_sigterm_hands_back_jobs_that_outlive_the_grace_period(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    worker = spawn_worker("impatient", JOBS_WORKER_SHUTDOWN_GRACE_S="0.5")
    created = await client.create(fail="hang")
    await eventually(lambda: running_on(db, "impatient"), timeout=15, message="never started")

    worker.signal(signal.SIGTERM)

    assert await worker.wait(15) == 0
    row = await db.fetchrow(
        "SELECT status, attempt_count, error_code FROM jobs WHERE id = $1", created.job.id
    )
    # handed back at once, the attempt not spent; no waiting for the lease to expire
    assert tuple(row) == ("retrying", 0, "WORKER_SHUTDOWN")
