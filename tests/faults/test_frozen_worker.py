"""Issue 29's scenario: three workers at the production lease (5 s, heartbeats every 1 s,
the reaper every 1 s), 24 jobs of a few seconds spread over them, one worker SIGKILLed and
another SIGSTOPped at the same moment. The jobs of both run again on the third within the
lease and 2 s, each succeeding once: a frozen worker holds nothing the fleet needs (work
tokens it fetched, its session) beyond its lease.

A killed worker with no successor costs the reconnect grace (JOBS_WORKER_RECONNECT_GRACE_S,
1 s by default since issue 43) and a second; with the grace off (0: a deployment whose
workers reach job_service through a proxy that restarts) it costs its lease: its session's
end cannot tell a crash from a cut connection (ADR 0003, amendment of issue 25)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime

import asyncpg
import grpc
import nats
import pytest
from nats.js.api import ConsumerInfo

from job_service.app import JobServiceApp
from shared.constants import DISPATCH_STREAM, Queue, dispatch_consumer
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from tests.faults.test_worker_sessions import session_open
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

SpawnWorker = Callable[..., WorkerProcess]
LEASE_TTL_S = 5.0
BOUND_S = LEASE_TTL_S + 2.0
# at least the worker's fetch wait (1 s): a token published sooner after a worker froze
# may still be fetched by it, and then waits out the ack wait
RECONNECT_GRACE_S = 1.0
# a token a frozen worker took comes back within the dispatch ack wait (10 s) and a margin
TOKEN_BACK_S = 13.0
JOBS = 24
# long enough to outlast the set-up (a worker process starting on a busy machine)
RUN_MS = 10_000
# 20 jobs fill both doomed workers (at least 4 on the killed one, 12 on the frozen one),
# leaving the frozen one free slots and so a fetch of work tokens outstanding when it stops
SLOTS = {"killed": 8, "frozen": 16, "survivor": JOBS}
FIRST_WAVE = 20


@pytest.fixture
async def job_service(
    request: pytest.FixtureRequest, database_url: str, nats_url: str
) -> AsyncIterator[JobServiceApp]:
    """The production lease, heartbeat and reaper intervals; the test's parameters
    (``indirect``) override settings."""
    async with running_job_service(
        database_url,
        nats_url,
        lease_ttl_s=LEASE_TTL_S,
        heartbeat_interval_s=1.0,
        reaper_interval_s=1.0,
        **getattr(request, "param", {}),
    ) as app:
        yield app


async def holding(db: asyncpg.Connection) -> dict[str, list[str]]:
    rows = await db.fetch(
        "SELECT locked_by, array_agg(id::text) AS ids FROM jobs WHERE status = 'running'"
        " GROUP BY locked_by"
    )
    return {row["locked_by"]: list(row["ids"]) for row in rows}


async def running(db: asyncpg.Connection) -> int:
    n: int = await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'running'")
    return n


# (job_service settings, the killed worker's jobs' bound)
CASES = {
    "without-a-reconnect-grace": ({"worker_reconnect_grace_s": 0}, BOUND_S),
    # issue 29 asks 2 s: 1.18-1.22 s measured on an idle machine, up to 1.97 s under two
    # CPU burners; the grace (1 s) plus 1.5 s keeps the test honest on a loaded machine
    "with-the-default-reconnect-grace": ({}, RECONNECT_GRACE_S + 1.5),
}


@pytest.mark.parametrize(
    ("job_service", "killed_bound_s"),
    list(CASES.values()),
    ids=list(CASES),
    indirect=["job_service"],
)
async def test_a_killed_and_a_frozen_workers_jobs_run_again_within_their_bounds(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker, killed_bound_s: float
) -> None:
    def spawn(worker_id: str) -> WorkerProcess:
        return spawn_worker(worker_id, JOBS_WORKER_SLOTS=f"ai-interactive={SLOTS[worker_id]}")

    workers = {worker_id: spawn(worker_id) for worker_id in ("killed", "frozen")}
    for worker_id in workers:
        await eventually(
            lambda w=worker_id: session_open(db, w),  # type: ignore[misc]
            timeout=20,
            message=f"{worker_id}: no session",
        )
    for n in range(FIRST_WAVE):
        await client.create(sleep_ms=RUN_MS, key=f"frozen-{n}")
    await eventually(lambda: _equals(running(db), FIRST_WAVE), timeout=20, message="never all ran")
    workers["survivor"] = spawn("survivor")
    await eventually(lambda: session_open(db, "survivor"), timeout=20, message="no session")
    for n in range(FIRST_WAVE, JOBS):
        await client.create(sleep_ms=RUN_MS, key=f"frozen-{n}")
    await eventually(lambda: _equals(running(db), JOBS), timeout=20, message="never all ran")
    held = await holding(db)
    assert len(held["killed"]) >= 4 and len(held["frozen"]) >= 12, held

    fault_at = await db.fetchval("SELECT clock_timestamp()")
    workers["frozen"].signal(signal.SIGSTOP)
    workers["killed"].signal(signal.SIGKILL)
    try:
        moved = held["killed"] + held["frozen"]
        await eventually(
            lambda: db.fetchval(
                "SELECT count(DISTINCT job_id) = $1 FROM job_events WHERE to_status = 'running'"
                " AND worker_id = 'survivor' AND job_id = ANY($2::uuid[])",
                len(moved),
                moved,
            ),
            timeout=BOUND_S + 30,
            message="the jobs did not move",
        )
        rerun = await db.fetch(
            "SELECT job_id::text, extract(epoch FROM min(created_at) - $1)::float AS after_s"
            " FROM job_events WHERE to_status = 'running' AND worker_id = 'survivor'"
            " AND job_id = ANY($2::uuid[]) GROUP BY job_id",
            fault_at,
            moved,
        )
        after = {row["job_id"]: row["after_s"] for row in rerun}
    finally:
        workers["frozen"].signal(signal.SIGCONT)

    slowest = {w: max(after[job] for job in held[w]) for w in ("killed", "frozen")}
    print(
        f"back at work on the survivor after the faults: killed worker's {len(held['killed'])}"
        f" jobs slowest {slowest['killed']:.2f} s, frozen worker's {len(held['frozen'])}"
        f" jobs slowest {slowest['frozen']:.2f} s (bounds {killed_bound_s:.1f} s and"
        f" {BOUND_S:.1f} s)"
    )
    assert slowest["frozen"] <= BOUND_S, after
    assert slowest["killed"] <= killed_bound_s, after

    # every job succeeds once: one result applied, the frozen worker's late ones refused
    await eventually(
        lambda: db.fetchval("SELECT count(*) = $1 FROM jobs WHERE status = 'succeeded'", JOBS),
        timeout=60,
        message="not every job succeeded",
    )
    applied = await db.fetchval("SELECT count(*) FROM job_events WHERE to_status = 'succeeded'")
    assert applied == JOBS


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


@pytest.mark.parametrize(
    "job_service",
    [{"worker_session_ping_interval_s": 0.5, "worker_reconnect_grace_s": 0}],
    indirect=True,
)
async def test_a_session_that_stops_pinging_is_ended_as_a_disconnect(
    client: Client, db: asyncpg.Connection
) -> None:
    """A frozen worker's connection stays up (its kernel still answers): the session ends
    after three ping intervals without a ping. A process that named itself keeps its
    leases (only a reconnect grace would end them); they run out as ever."""
    session = client.executor.WorkerSession()
    await session.write(epb.WorkerSessionRequest(worker_id="silent", incarnation="p-1"))
    first = await session.read()
    assert first.ping_interval_ms == 500 and first.disconnect_grace_ms == 0
    created = await client.create(sleep_ms=60_000)
    locked = await client.lock(created.job.id, worker_id="silent")
    assert locked.outcome == epb.LOCK_OUTCOME_LOCKED
    opened_at = await db.fetchval("SELECT clock_timestamp()")

    # the job service ended it: no pings came
    assert await asyncio.wait_for(session.read(), 10) is grpc.aio.EOF
    # the row is closed by a task of its own after the stream ended: wait for it
    row = await eventually(
        lambda: db.fetchrow(
            "SELECT extract(epoch FROM closed_at - $1)::float AS after_s, goodbye"
            " FROM worker_sessions WHERE worker_id = 'silent' AND closed_at IS NOT NULL",
            opened_at,
        ),
        timeout=5,
        message="the session's row was not closed",
    )
    assert row["goodbye"] is False
    assert 1.0 <= row["after_s"] < 1.5 + 2.0  # three intervals of 0.5 s
    job = await db.fetchrow("SELECT status, locked_by FROM jobs WHERE id = $1", created.job.id)
    assert tuple(job) == ("running", "silent")
    session.cancel()


async def test_a_token_a_worker_took_just_before_it_froze_comes_back_within_the_ack_wait(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker, nats_url: str
) -> None:
    """A frozen worker's last fetch still takes work tokens (here its fetch waits 30 s, so
    the job's token surely reaches it): the job waits for the token's ack wait, then runs
    on another worker: 10 s (DISPATCH_ACK_WAIT_S), not the 30 s it was (issue 29). The
    worker takes tokens only (no grants ahead): a job pushed to a worker that just froze is
    the next test's."""
    frozen = spawn_worker(
        "frozen", JOBS_WORKER_FETCH_TIMEOUT_S="30", JOBS_WORKER_GRANTS_AHEAD="false"
    )
    await eventually(lambda: session_open(db, "frozen"), timeout=20, message="no session")
    frozen.signal(signal.SIGSTOP)
    try:
        created_at = await db.fetchval("SELECT clock_timestamp()")
        created = await client.create(sleep_ms=100)
        nc = await nats.connect(nats_url)
        try:
            consumer = dispatch_consumer(Queue.INTERACTIVE.value)
            info = nc.jetstream().consumer_info
            await eventually(
                lambda: _held_by_a_worker(info(DISPATCH_STREAM, consumer)),
                timeout=10,
                message="the token never reached the frozen worker",
            )
        finally:
            await nc.close()
        spawn_worker("other")
        await _succeeded(db, created.job.id)
    finally:
        frozen.signal(signal.SIGCONT)
    ran_after = await _ran_on_other_after(db, created_at)
    print(f"a token held by a frozen worker: its job ran after {ran_after:.2f} s")
    assert ran_after < TOKEN_BACK_S, f"the job waited {ran_after:.1f} s for its token"


async def test_a_job_pushed_to_a_worker_that_just_froze_runs_elsewhere_after_its_lease(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    """Grants ahead (ADR 0009): a worker reports its slots every 0.25 s and is pushed
    nothing once silent for 0.75 s, but a job created right after it froze is pushed to it
    (a grant in flight to a worker that stops is the push path's version of the token
    above). The grant is an ordinary lease: the job runs on another worker once it
    expires, sooner than a token's ack wait."""
    frozen = spawn_worker("frozen")
    await eventually(lambda: session_open(db, "frozen"), timeout=20, message="no session")
    frozen.signal(signal.SIGSTOP)
    try:
        created_at = await db.fetchval("SELECT clock_timestamp()")
        created = await client.create(sleep_ms=100)
        await eventually(
            lambda: db.fetchval(
                "SELECT locked_by = 'frozen' FROM jobs WHERE id = $1", created.job.id
            ),
            timeout=5,
            message="the job was not pushed to the worker that had just reported free slots",
        )
        spawn_worker("other")
        await _succeeded(db, created.job.id)
    finally:
        frozen.signal(signal.SIGCONT)
    ran_after = await _ran_on_other_after(db, created_at)
    print(f"a grant pushed to a frozen worker: its job ran after {ran_after:.2f} s")
    assert ran_after < TOKEN_BACK_S, f"the job waited {ran_after:.1f} s for its lease"


async def _succeeded(db: asyncpg.Connection, job_id: str) -> None:
    await eventually(
        lambda: db.fetchval("SELECT status = 'succeeded' FROM jobs WHERE id = $1", job_id),
        timeout=40,
        message="the job never ran",
    )


async def _ran_on_other_after(db: asyncpg.Connection, since: datetime) -> float:
    """Seconds from ``since`` until the worker "other" started the job."""
    return float(
        await db.fetchval(
            "SELECT extract(epoch FROM min(created_at) - $1)::float FROM job_events"
            " WHERE to_status = 'running' AND worker_id = 'other'",
            since,
        )
    )


async def _held_by_a_worker(info: Awaitable[ConsumerInfo]) -> bool:
    """The token was delivered and not acked: a worker holds it."""
    return (await info).num_ack_pending == 1
