"""Worker sessions (issue 18, issue 25): a crashed worker process with no successor under
its worker id costs its lease, once (a restarted one ends its predecessor's leases at once:
test_worker_incarnations.py); an older worker, whose sessions name no process, still has
its leases ended within the disconnect grace; a paused worker (connection still open)
keeps its leases until they expire; a worker shut down with SIGTERM says goodbye; a
job_service replica that crashes costs no lease, its workers moving to another replica."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from devstack.embedded.ports import free_port
from job_service.app import JobServiceApp
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from tests.support.processes import JobServiceProcess, WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

SpawnWorker = Callable[..., WorkerProcess]
LEASE_TTL_S = 4.0
# an older worker's crash: its jobs run again within this, well under the lease
RERUN_BOUND_S = 2.0
JOBS = 20
SLOTS = {"JOBS_WORKER_SLOTS": f"ai-interactive={JOBS}"}


@pytest.fixture
async def job_service(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    """Leases long enough that a re-run within RERUN_BOUND_S cannot be the reaper's; no
    reconnect grace (on by default since issue 43: test_crash_recovery.py), so that a
    current worker's sessions end nothing by themselves."""
    async with running_job_service(
        database_url,
        nats_url,
        lease_ttl_s=LEASE_TTL_S,
        heartbeat_interval_s=0.5,
        worker_reconnect_grace_s=0,
    ) as app:
        yield app


async def leased_by(db: asyncpg.Connection, worker_id: str) -> int:
    n: int = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE status = 'running' AND locked_by = $1", worker_id
    )
    return n


async def running_on(db: asyncpg.Connection, workers: tuple[str, ...]) -> int:
    n: int = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE status = 'running' AND locked_by = ANY($1::text[])",
        list(workers),
    )
    return n


async def session_open(db: asyncpg.Connection, worker_id: str) -> bool:
    return bool(
        await db.fetchval(
            "SELECT count(*) FROM worker_sessions WHERE worker_id = $1 AND closed_at IS NULL",
            worker_id,
        )
    )


async def reasons(db: asyncpg.Connection) -> list[str]:
    rows = await db.fetch("SELECT reason FROM job_events WHERE reason IS NOT NULL ORDER BY id")
    return [r["reason"] for r in rows]


async def test_a_crashed_worker_with_no_successor_costs_its_lease_once(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    """A 3-worker stack: one worker holds 20 running jobs and is SIGKILLed, and no process
    takes its worker id; the other two take its jobs over when the leases run out (its
    session's end alone proves nothing: a live worker's session can be cut too)."""
    doomed = spawn_worker("doomed", **SLOTS)
    for n in range(JOBS):
        await client.create(sleep_ms=20_000, key=f"crash-{n}")
    await eventually(
        lambda: _equals(leased_by(db, "doomed"), JOBS), timeout=20, message="never all started"
    )
    survivors = ("survivor-1", "survivor-2")
    for worker_id in survivors:
        spawn_worker(worker_id, **SLOTS)
    for worker_id in survivors:
        await eventually(
            lambda w=worker_id: session_open(db, w),  # type: ignore[misc]
            timeout=15,
            message="no session",
        )

    killed_at = await db.fetchval("SELECT clock_timestamp()")
    doomed.signal(signal.SIGKILL)
    await doomed.wait(5)
    await eventually(
        lambda: _equals(running_on(db, survivors), JOBS),
        timeout=LEASE_TTL_S + 10,
        message="the jobs did not move",
    )

    rerun = await db.fetch(
        "SELECT job_id, extract(epoch FROM min(created_at) - $1) AS after_s FROM job_events"
        " WHERE to_status = 'running' AND worker_id = ANY($2::text[]) GROUP BY job_id",
        killed_at,
        list(survivors),
    )
    assert len(rerun) == JOBS
    slowest = max(float(r["after_s"]) for r in rerun)
    print(f"re-run after the kill: slowest of {JOBS} {slowest:.3f} s")
    # the lease (extended up to a heartbeat before the kill), the reaper, a dispatch
    assert slowest < LEASE_TTL_S + RERUN_BOUND_S, f"slowest re-run {slowest:.2f}s after the kill"
    # ended by the reaper, each once
    assert await reasons(db) == ["LEASE_EXPIRED"] * JOBS
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE attempt_count <> 2") == 0
    session = await db.fetchrow(
        "SELECT closed_at IS NOT NULL AS closed, goodbye FROM worker_sessions"
        " WHERE worker_id = 'doomed'"
    )
    assert tuple(session) == (True, False)


async def test_an_older_workers_crash_ends_its_leases_within_the_grace(
    client: Client, db: asyncpg.Connection
) -> None:
    """A worker that predates incarnations (its session names no process): a session that
    ends without a goodbye, not replaced within the grace, ends its leases at once."""
    session = client.executor.WorkerSession()
    await session.write(epb.WorkerSessionRequest(worker_id="older"))
    assert (await session.read()).session_id
    created = await client.create(sleep_ms=60_000)
    locked = await client.executor.LockJob(
        epb.LockJobRequest(job_id=created.job.id, worker_id="older")
    )
    assert locked.outcome == epb.LOCK_OUTCOME_LOCKED

    cut_at = await db.fetchval("SELECT clock_timestamp()")
    session.cancel()  # its connection closed: it crashed
    await eventually(lambda: reasons(db), timeout=LEASE_TTL_S, message="the lease did not end")

    ended_after = await db.fetchval(
        "SELECT extract(epoch FROM min(created_at) - $1) FROM job_events WHERE reason IS NOT NULL",
        cut_at,
    )
    assert await reasons(db) == ["WORKER_DISCONNECTED"]
    assert float(ended_after) < RERUN_BOUND_S  # the grace (0.5 s), not the lease


async def test_a_paused_worker_keeps_its_leases_until_they_expire(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    paused = spawn_worker("paused")
    created = await client.create(sleep_ms=3000)
    await eventually(lambda: leased_by(db, "paused"), timeout=15, message="never started")
    spawn_worker("other")

    stopped_at = await db.fetchval("SELECT clock_timestamp()")
    paused.signal(signal.SIGSTOP)
    await eventually(
        lambda: leased_by(db, "other"), timeout=LEASE_TTL_S + 15, message="never moved"
    )
    moved_after = await db.fetchval(
        "SELECT extract(epoch FROM min(created_at) - $1) FROM job_events"
        " WHERE to_status = 'retrying'",
        stopped_at,
    )
    paused.signal(signal.SIGCONT)

    # its connection stayed open: no early re-run, the lease was waited out
    assert float(moved_after) > LEASE_TTL_S - 1.0
    assert await reasons(db) == ["LEASE_EXPIRED"]
    await eventually(
        lambda: "lease" in paused.log().lower(), timeout=15, message="late submit not refused"
    )
    await eventually(lambda: _equals(_succeeded(db), 1), timeout=15, message="not finished")
    job = await client.get(created.job.id)
    assert dict(job.output)["attempt"] == 2  # the other worker's result, applied once


async def test_a_worker_stopped_with_sigterm_says_goodbye(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    worker = spawn_worker("leaving", JOBS_WORKER_SHUTDOWN_GRACE_S="0.2")
    created = await client.create(fail="hang")
    await eventually(lambda: leased_by(db, "leaving"), timeout=15, message="never started")

    worker.signal(signal.SIGTERM)

    assert await worker.wait(15) == 0
    row = await db.fetchrow(
        "SELECT status, attempt_count, error_code FROM jobs WHERE id = $1", created.job.id
    )
    assert tuple(row) == ("retrying", 0, "WORKER_SHUTDOWN")  # handed back at once
    session = await db.fetchrow(
        "SELECT closed_at IS NOT NULL AS closed, goodbye FROM worker_sessions"
        " WHERE worker_id = 'leaving'"
    )
    assert tuple(session) == (True, True)
    assert "WORKER_DISCONNECTED" not in await reasons(db)


async def test_a_crashed_replica_costs_no_lease(
    tmp_path: Path,
    database_url: str,
    nats_url: str,
    client: Client,
    db: asyncpg.Connection,
) -> None:
    """The second replica starts after the worker, as one restarted in a rolling update
    would: the worker's channel first found it refusing, and must try it again soon enough
    that, when the first replica dies, the session and heartbeats move before a lease
    runs out (on gRPC's default reconnect backoff they waited up to the next try, 2.6 s and
    then 5.2 s after the worker started: six LEASE_EXPIRED in CI)."""
    env = {
        "JOBS_LEASE_TTL_S": str(LEASE_TTL_S),
        "JOBS_HEARTBEAT_INTERVAL_S": "0.5",
        "JOBS_SHUTDOWN_DELAY_S": "0",
    }
    ports = (free_port(), free_port())
    both = "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports)
    doomed = JobServiceProcess(tmp_path, "js1", database_url, nats_url, ports[0], **env)
    replicas = [doomed]
    worker = WorkerProcess(tmp_path, "steady", nats_url, both, **SLOTS)
    try:
        await eventually(lambda: _session_on(db, "steady", "js1"), timeout=20, message="no session")
        other = JobServiceProcess(tmp_path, "js2", database_url, nats_url, ports[1], **env)
        replicas.append(other)
        await eventually(
            lambda: _serving(other), timeout=20, message="the second replica never served"
        )
        created = [await client.create(sleep_ms=9000, key=f"steady-{n}") for n in range(6)]
        # running at the worker, not only locked: a lock whose answer the kill cuts off
        # leaves a job the worker never heard of, to its lease (a cost of the crash)
        await eventually(
            lambda: _equals(_heartbeaten_by(db, "steady"), 6), timeout=30, message="never started"
        )

        killed_at = await db.fetchval("SELECT clock_timestamp()")
        doomed.signal(signal.SIGKILL)
        await doomed.wait(5)
        await eventually(
            lambda: _session_on(db, "steady", other.instance_id),
            timeout=LEASE_TTL_S,
            message="the worker did not move to the other replica",
        )
        moved_after = await db.fetchval(
            "SELECT extract(epoch FROM opened_at - $1) FROM worker_sessions"
            " WHERE worker_id = 'steady' AND instance_id = $2",
            killed_at,
            other.instance_id,
        )
        print(f"session on the other replica {float(moved_after):.2f} s after the kill")
        await eventually(
            lambda: _equals(_succeeded(db), 6), timeout=30, message="the jobs did not finish"
        )

        assert await reasons(db) == []  # nothing ended by expiry or disconnect
        rows = await db.fetch(
            "SELECT attempt_count FROM jobs WHERE id = ANY($1::uuid[])", [c.job.id for c in created]
        )
        assert [r["attempt_count"] for r in rows] == [1] * 6
    finally:
        worker.close()
        for replica in replicas:
            replica.close()


async def _heartbeaten_by(db: asyncpg.Connection, worker_id: str) -> int:
    """Running jobs whose lease a heartbeat has extended (the lock gave lease TTL)."""
    n: int = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE status = 'running' AND locked_by = $1"
        " AND lock_until - locked_at > make_interval(secs => $2)",
        worker_id,
        LEASE_TTL_S + 0.2,
    )
    return n


async def _serving(replica: JobServiceProcess) -> bool:
    return "serving gRPC on" in replica.log()


async def _session_on(db: asyncpg.Connection, worker_id: str, instance_id: str) -> bool:
    return bool(
        await db.fetchval(
            "SELECT count(*) FROM worker_sessions WHERE worker_id = $1 AND instance_id = $2"
            " AND closed_at IS NULL",
            worker_id,
            instance_id,
        )
    )


async def _succeeded(db: asyncpg.Connection) -> int:
    n: int = await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'succeeded'")
    return n


async def _equals(count: Awaitable[int], expected: int) -> bool:
    return await count == expected
