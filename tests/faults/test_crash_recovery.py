"""Crash recovery as shipped (issue 43): with `make run`'s defaults (job_service started as
a process with nothing but its address, database and tokens set; workers likewise), the 8
jobs of a SIGKILLed worker run again on the two other workers within 2 s of the kill, each
applied once. The default reconnect grace (JOBS_WORKER_RECONNECT_GRACE_S, 1 s) ends the
killed process's leases, not its lease (5 s)."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest

from devstack.embedded.ports import free_port
from tests.faults.test_worker_sessions import reasons, running_on, session_open
from tests.support.processes import JobServiceProcess, WorkerProcess
from tests.support.stack import Client
from tests.support.wait import eventually

SpawnWorker = Callable[..., WorkerProcess]
JOBS = 8
BOUND_S = 2.0
# long enough to outlast the survivors' start on a busy machine, short enough to finish
RUN_MS = 12_000
SLOTS = {"JOBS_WORKER_SLOTS": f"ai-interactive={JOBS}"}


@pytest.fixture
def target(tmp_path: Path, database_url: str, nats_url: str) -> Iterator[str]:
    """job_service as `make run` starts it: every setting but where it is at its default."""
    replica = JobServiceProcess(tmp_path, "js-defaults", database_url, nats_url, free_port())
    try:
        yield replica.target
    finally:
        replica.close()


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def test_a_killed_workers_jobs_run_again_within_two_seconds_at_the_defaults(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    doomed = spawn_worker("doomed", **SLOTS)
    await eventually(lambda: session_open(db, "doomed"), timeout=30, message="no session")
    for n in range(JOBS):
        await client.create(sleep_ms=RUN_MS, key=f"crash-{n}")
    await eventually(
        lambda: _equals(running_on(db, ("doomed",)), JOBS), timeout=20, message="never all ran"
    )
    survivors = ("survivor-1", "survivor-2")
    for worker_id in survivors:
        spawn_worker(worker_id, **SLOTS)
    for worker_id in survivors:
        await eventually(
            lambda w=worker_id: session_open(db, w),  # type: ignore[misc]
            timeout=30,
            message=f"{worker_id}: no session",
        )

    killed_at = await db.fetchval("SELECT clock_timestamp()")
    doomed.signal(signal.SIGKILL)
    await doomed.wait(5)
    await eventually(
        lambda: _equals(running_on(db, survivors), JOBS), timeout=15, message="never moved"
    )
    rerun = await db.fetch(
        "SELECT job_id, extract(epoch FROM min(created_at) - $1)::float AS after_s"
        " FROM job_events WHERE to_status = 'running' AND worker_id = ANY($2::text[])"
        " GROUP BY job_id",
        killed_at,
        list(survivors),
    )
    slowest = max(r["after_s"] for r in rerun)
    print(f"re-run after the kill at the defaults: slowest of {JOBS} {slowest:.3f} s")
    assert len(rerun) == JOBS
    assert slowest < BOUND_S, f"slowest re-run {slowest:.2f} s after the kill"
    # the reconnect grace ended them, each once, not the reaper
    assert await reasons(db) == ["WORKER_DISCONNECTED"] * JOBS

    await eventually(
        lambda: db.fetchval("SELECT count(*) = $1 FROM jobs WHERE status = 'succeeded'", JOBS),
        timeout=RUN_MS / 1000 + 20,
        message="the jobs did not finish",
    )
    applied = await db.fetchval("SELECT count(*) FROM job_events WHERE to_status = 'succeeded'")
    assert applied == JOBS
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE attempt_count <> 2") == 0
