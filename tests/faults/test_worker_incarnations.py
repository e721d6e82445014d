"""Crash detection by process, not by worker id (issue 25, ADR 0003): a worker process
restarted under the same worker id (a container restarted in its pod) ends its previous
process's leases as soon as its session opens, however short the restart; a live worker
whose session is cut for longer than the disconnect grace, but shorter than its leases,
loses no lease and repeats no job — unless the deployment set a reconnect grace shorter
than the cut (JOBS_WORKER_RECONNECT_GRACE_S, issue 29), which ends them."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from job_service.app import JobServiceApp
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.tcp_proxy import TcpProxy
from tests.support.wait import eventually

JOBS = 8
SLOTS = {"JOBS_WORKER_SLOTS": f"ai-interactive={JOBS}"}
# A restarted process's jobs run again within this of its new session: at once, not
# after the lease.
RERUN_BOUND_S = 3.0
# How long the worker's connections stay cut: over the disconnect grace (0.5 s), which
# used to end every lease of the worker, and well under its lease.
CUT_S = 1.5


@pytest.fixture
async def job_service(
    request: pytest.FixtureRequest, database_url: str, nats_url: str
) -> AsyncIterator[JobServiceApp]:
    """Leases long enough that a re-run within the bounds cannot be the reaper's; the
    test's parameters (``indirect``) override settings."""
    settings = {"lease_ttl_s": 12.0, "heartbeat_interval_s": 0.5, **getattr(request, "param", {})}
    async with running_job_service(database_url, nats_url, **settings) as app:
        yield app


# A grace longer than the restart takes, as a container restart in its pod is faster than
# the 0.5 s default: before incarnations, the new process was taken for the old one back.
@pytest.mark.parametrize(
    "job_service",
    [{"worker_disconnect_grace_s": 10.0, "worker_reconnect_grace_s": 0}],
    indirect=True,
)
async def test_a_worker_restarted_under_its_id_ends_its_previous_processs_leases_at_once(
    tmp_path: Path, nats_url: str, target: str, client: Client, db: asyncpg.Connection
) -> None:
    doomed = WorkerProcess(tmp_path, "pod-0", nats_url, target, **SLOTS)
    restarted: WorkerProcess | None = None
    try:
        for n in range(JOBS):
            await client.create(sleep_ms=60_000, key=f"restart-{n}")
        await eventually(
            lambda: _equals(_running(db, attempt=1), JOBS), timeout=20, message="never started"
        )
        killed_at = await db.fetchval("SELECT clock_timestamp()")
        doomed.signal(signal.SIGKILL)
        await doomed.wait(5)
        restarted = WorkerProcess(tmp_path, "pod-0", nats_url, target, **SLOTS)
        await eventually(
            lambda: _equals(_running(db, attempt=2), JOBS),
            timeout=30,
            message="the jobs did not run again",
        )

        opened_at = await db.fetchval(
            "SELECT max(opened_at) FROM worker_sessions WHERE worker_id = 'pod-0'"
        )
        rerun = await db.fetch(
            "SELECT job_id, extract(epoch FROM min(created_at) - $1) AS after_s FROM job_events"
            " WHERE to_status = 'running' AND created_at > $2 GROUP BY job_id",
            opened_at,
            killed_at,
        )
        slowest = max(float(r["after_s"]) for r in rerun)
        print(f"re-run after the new process's session: slowest of {JOBS} {slowest:.3f} s")
        assert len(rerun) == JOBS
        assert slowest < RERUN_BOUND_S, f"slowest re-run {slowest:.2f}s after the new session"
        # ended when the new process's session opened, each once, not by the reaper
        assert await _reasons(db) == ["WORKER_DISCONNECTED"] * JOBS
        processes = await db.fetch(
            "SELECT DISTINCT incarnation FROM worker_sessions WHERE worker_id = 'pod-0'"
        )
        assert len(processes) == 2 and None not in {r["incarnation"] for r in processes}
    finally:
        doomed.close()
        if restarted is not None:
            restarted.close()


# without a reconnect grace (0: the lease decides), and with one (on by default since issue
# 43) longer than the cut and its reconnect
@pytest.mark.parametrize(
    "job_service",
    [{"worker_reconnect_grace_s": 0}, {"worker_reconnect_grace_s": CUT_S + 2.5}],
    ids=["without-a-reconnect-grace", "within-a-reconnect-grace"],
    indirect=True,
)
async def test_a_live_worker_whose_session_is_cut_for_less_than_its_lease_keeps_its_jobs(
    tmp_path: Path, nats_url: str, target: str, client: Client, db: asyncpg.Connection
) -> None:
    async with _worker_behind_a_proxy(tmp_path, nats_url, target, client, db, "steady") as proxy:
        first = await db.fetchval("SELECT max(id) FROM worker_sessions")

        proxy.cut()
        await eventually(
            lambda: _session_closed(db, first), timeout=5, message="the cut was not seen"
        )
        await asyncio.sleep(CUT_S)  # the fault's length, not a synchronisation
        proxy.restore()
        await eventually(
            lambda: _reopened(db, "steady", first), timeout=10, message="never reconnected"
        )
        await eventually(
            lambda: _equals(_succeeded(db), JOBS), timeout=30, message="the jobs did not end"
        )

    # no lease ended, no job ran twice
    assert await _reasons(db) == []
    counts = await db.fetch("SELECT attempt_count FROM jobs")
    assert [r["attempt_count"] for r in counts] == [1] * JOBS
    sessions = await db.fetch(
        "SELECT incarnation, goodbye FROM worker_sessions WHERE worker_id = 'steady' ORDER BY id"
    )
    assert len(sessions) >= 2 and len({s["incarnation"] for s in sessions}) == 1  # one process
    assert sessions[0]["goodbye"] is False


# The price of a reconnect grace: a live worker cut off for longer loses its jobs, which
# run again (here on the same worker, once it is back).
@pytest.mark.parametrize("job_service", [{"worker_reconnect_grace_s": 1.0}], indirect=True)
async def test_a_cut_longer_than_the_reconnect_grace_ends_the_workers_leases(
    tmp_path: Path, nats_url: str, target: str, client: Client, db: asyncpg.Connection
) -> None:
    async with _worker_behind_a_proxy(tmp_path, nats_url, target, client, db, "cut-off") as proxy:
        cut_at = await db.fetchval("SELECT clock_timestamp()")
        proxy.cut()
        await eventually(
            lambda: _equals(_count(_reasons(db)), JOBS),
            timeout=10,
            message="the leases did not end",
        )
        ended_after = await db.fetchval(
            "SELECT extract(epoch FROM max(created_at) - $1) FROM job_events"
            " WHERE reason IS NOT NULL",
            cut_at,
        )
        proxy.restore()
        await eventually(
            lambda: _equals(_succeeded(db), JOBS), timeout=30, message="the jobs did not end"
        )

    assert await _reasons(db) == ["WORKER_DISCONNECTED"] * JOBS
    assert float(ended_after) < 12.0 - 6.0  # the grace, not the lease
    counts = await db.fetch("SELECT attempt_count FROM jobs")
    assert [r["attempt_count"] for r in counts] == [2] * JOBS


@asynccontextmanager
async def _worker_behind_a_proxy(
    tmp_path: Path,
    nats_url: str,
    target: str,
    client: Client,
    db: asyncpg.Connection,
    worker_id: str,
) -> AsyncIterator[TcpProxy]:
    """A worker reaching job_service through a proxy the test can cut, running JOBS jobs
    of 6 s, each in its first attempt."""
    async with TcpProxy(target) as proxy:
        worker = WorkerProcess(tmp_path, worker_id, nats_url, proxy.target, **SLOTS)
        try:
            for n in range(JOBS):
                await client.create(sleep_ms=6000, key=f"{worker_id}-{n}")
            await eventually(
                lambda: _equals(_running(db, attempt=1), JOBS), timeout=20, message="never started"
            )
            yield proxy
        finally:
            worker.close()


async def _count(items: Awaitable[list[str]]) -> int:
    return len(await items)


async def _running(db: asyncpg.Connection, *, attempt: int) -> int:
    n: int = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE status = 'running' AND attempt_count = $1", attempt
    )
    return n


async def _succeeded(db: asyncpg.Connection) -> int:
    n: int = await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'succeeded'")
    return n


async def _reasons(db: asyncpg.Connection) -> list[str]:
    rows = await db.fetch("SELECT reason FROM job_events WHERE reason IS NOT NULL ORDER BY id")
    return [r["reason"] for r in rows]


async def _session_closed(db: asyncpg.Connection, session_id: int) -> bool:
    return bool(
        await db.fetchval(
            "SELECT closed_at IS NOT NULL FROM worker_sessions WHERE id = $1", session_id
        )
    )


async def _reopened(db: asyncpg.Connection, worker_id: str, after: int) -> bool:
    return bool(
        await db.fetchval(
            "SELECT count(*) FROM worker_sessions WHERE worker_id = $1 AND id > $2"
            " AND closed_at IS NULL",
            worker_id,
            after,
        )
    )


async def _equals(count: Awaitable[int], expected: int) -> bool:
    return await count == expected
