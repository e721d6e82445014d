"""The faults, one coroutine each: inject, restore, and record what recovery to measure.

Each returns a ``FaultRecord``. Times that decide recovery come from the database clock
(``injected_at``, ``SELECT clock_timestamp()``), like the timeline the checker reads;
``probe_s`` is the client's view: from the injection until a fresh job succeeded.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import nats

from shared.constants import MSG_ID_HEADER, dispatch_subject
from shared.startup import nats_servers
from tests.chaos.workload import KINDS

if TYPE_CHECKING:
    from tests.chaos.cluster import Cluster, Replica, WorkerSlot
    from tests.chaos.workload import Workload

# How long a probe job may take to get through after a fault before it counts as a
# violation (the stack is expected back well within this).
PROBE_TIMEOUT_S = 30.0
OUTAGE_S = 1.0
# Jobs created while the workers are frozen before a data loss, and how long they get to
# be published (the whole freeze stays well under a lease).
BURST = 12
BURST_WAIT_S = 0.4
# SIGSTOP/SIGCONT tries to catch a replica between committing and publishing outbox rows.
CATCH_TRIES = 600
# jobs created every CATCH_BURST_EVERY tries, so that there are rows to catch in flight
CATCH_BURST = 8
CATCH_BURST_EVERY = 50
DUPLICATES = 40

LEASED = "status IN ('running', 'cancel_requested')"


@dataclass
class FaultRecord:
    kind: str
    target: str
    # database clock (Unix seconds) at the injection
    injected_at: float
    # jobs whose recovery the checker measures from injected_at, and its bound; an AI job
    # (one with a model tier) is held to ai_bound_s instead when set: its retry backoff is
    # its type's, longer than the synthetic jobs'
    affected: list[str] = field(default_factory=list)
    bound_s: float | None = None
    ai_bound_s: float | None = None
    # from the injection until a fresh job succeeded (client clock), if probed
    probe_s: float | None = None
    notes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    # SIGTERM'd worker: jobs it held whose attempt must not end by lease expiry
    handed_back_by: str | None = None
    # a frozen or cut-off replica (tests/chaos/replica_faults.py): what waited on it and
    # how long (seconds), each held to wait_bound_s; and the window (database clock) whose
    # schedule slots must each fire within slot_bound_s of their time
    waits: dict[str, float] = field(default_factory=dict)
    wait_bound_s: float | None = None
    slot_window: tuple[float, float] | None = None
    slot_bound_s: float | None = None


@dataclass
class FaultContext:
    cluster: Cluster
    workload: Workload
    rng: random.Random
    counter: int = 0

    def key(self, what: str) -> str:
        """A fresh idempotency key for a job a fault creates itself."""
        self.counter += 1
        return f"{what}-{self.counter}"


async def _leased_by(cluster: Cluster, worker_id: str) -> list[str]:
    pool = await cluster.db()
    rows = await pool.fetch(
        f"SELECT id::text FROM jobs WHERE {LEASED} AND locked_by = $1", worker_id
    )
    return [r["id"] for r in rows]


async def _busiest_worker(ctx: FaultContext) -> WorkerSlot:
    """A live worker, preferring one with jobs in flight (waits a little for one)."""
    live = [w for w in ctx.cluster.workers if w.process and w.process.process.poll() is None]
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        for worker in ctx.rng.sample(live, len(live)):
            if await _leased_by(ctx.cluster, worker.worker_id):
                return worker
        await asyncio.sleep(0.1)  # poll for a worker with work, bounded above
    return ctx.rng.choice(live)


async def _probe(ctx: FaultContext, record: FaultRecord, started: float) -> None:
    took = await ctx.workload.probe(ctx.key("probe"), PROBE_TIMEOUT_S)
    if took is None:
        record.violations.append(f"no fresh job succeeded within {PROBE_TIMEOUT_S}s")
    else:
        record.probe_s = time.monotonic() - started


# --------------------------------------------------------------------------- workers


async def worker_kill(ctx: FaultContext) -> FaultRecord:
    """SIGKILL a worker with jobs in flight, start a new one."""
    worker = await _busiest_worker(ctx)
    victim = worker.worker_id
    record = FaultRecord("worker_kill", victim, await ctx.cluster.db_now())
    record.affected = await _leased_by(ctx.cluster, victim)
    record.bound_s = ctx.cluster.settings.worker_recovery_bound_s()
    record.ai_bound_s = ctx.cluster.settings.ai_recovery_bound_s()
    assert worker.process is not None
    worker.process.signal(signal.SIGKILL)
    await worker.process.wait(10)
    worker.start()
    return record


async def worker_pause(ctx: FaultContext) -> FaultRecord:
    """SIGSTOP a worker past its lease, then SIGCONT: its late results must be refused."""
    worker = await _busiest_worker(ctx)
    victim = worker.worker_id
    record = FaultRecord("worker_pause", victim, await ctx.cluster.db_now())
    record.affected = await _leased_by(ctx.cluster, victim)
    s = ctx.cluster.settings
    record.bound_s = s.worker_recovery_bound_s()
    record.ai_bound_s = s.ai_recovery_bound_s()
    assert worker.process is not None
    worker.process.signal(signal.SIGSTOP)
    await asyncio.sleep(s.lease_ttl_s + s.reaper_interval_s + 1.5)  # past the lease
    worker.process.signal(signal.SIGCONT)
    return record


async def worker_sigterm(ctx: FaultContext) -> FaultRecord:
    """SIGTERM a worker with jobs in flight (a rolling update): it must finish or hand
    back its jobs within its grace period and exit 0; then a new one starts."""
    worker = await _busiest_worker(ctx)
    victim = worker.worker_id
    record = FaultRecord("worker_sigterm", victim, await ctx.cluster.db_now())
    record.affected = await _leased_by(ctx.cluster, victim)
    record.handed_back_by = victim
    bound = ctx.cluster.settings.sigterm_bound_s()
    assert worker.process is not None
    started = time.monotonic()
    worker.process.signal(signal.SIGTERM)
    try:
        status = await worker.process.wait(bound + 30)
    except Exception:
        record.violations.append(f"{victim} did not exit after SIGTERM")
        worker.process.signal(signal.SIGKILL)
        await worker.process.wait(10)
        status = None
    took = time.monotonic() - started
    record.notes.append(f"exit {status} after {took:.1f}s with {len(record.affected)} jobs held")
    if status != 0:
        record.violations.append(f"{victim} exited with {status} after SIGTERM")
    if took > bound:
        record.violations.append(f"{victim} took {took:.1f}s to stop (bound {bound:.1f}s)")
    worker.start()
    return record


# --------------------------------------------------------------------------- job_service


async def _restart(replica: Replica) -> None:
    assert replica.process is not None
    await replica.process.wait(10)
    await replica.start()


async def service_kill(ctx: FaultContext) -> FaultRecord:
    """SIGKILL a job_service replica at a random moment, restart it."""
    replica = ctx.rng.choice(ctx.cluster.replicas)
    record = FaultRecord("service_kill", replica.instance_id, await ctx.cluster.db_now())
    started = time.monotonic()
    assert replica.process is not None
    replica.process.signal(signal.SIGKILL)
    await _restart(replica)
    await _probe(ctx, record, started)
    return record


async def service_kill_unpublished(ctx: FaultContext) -> FaultRecord:
    """SIGKILL a replica between committing outbox rows and publishing them: freeze it
    (SIGSTOP) until the database shows it holding claimed, unpublished dispatch rows, then
    kill it. Another replica must take those rows over after the claim TTL."""
    replica = ctx.rng.choice(ctx.cluster.replicas)
    assert replica.process is not None
    pool = await ctx.cluster.db()
    caught: list[str] = []
    for n in range(CATCH_TRIES):
        if n % CATCH_BURST_EVERY == 0:  # keep the dispatchers busy while we try
            for _ in range(CATCH_BURST):
                ctx.workload.submit(KINDS[0], ctx.key("catch"))
        replica.process.signal(signal.SIGSTOP)
        rows = await pool.fetch(
            "SELECT aggregate_id FROM outbox_events WHERE status = 'processing'"
            " AND locked_by = $1 AND event_type = 'job.dispatch'",
            replica.instance_id,
        )
        if rows:
            caught = [r["aggregate_id"] for r in rows]
            break
        replica.process.signal(signal.SIGCONT)
        await asyncio.sleep(0.005)  # let it run a little before the next try
    now = await ctx.cluster.db_now()
    record = FaultRecord("service_kill_unpublished", replica.instance_id, now)
    started = time.monotonic()
    replica.process.signal(signal.SIGKILL)
    replica.process.signal(signal.SIGCONT)
    s = ctx.cluster.settings
    record.affected = caught
    record.bound_s = s.outbox_claim_ttl_s + s.outbox_poll_interval_s + s.SLACK_S
    record.notes.append(
        f"killed holding {len(caught)} claimed, unpublished dispatch rows"
        if caught
        else f"no claimed rows seen in {CATCH_TRIES} tries; killed anyway"
    )
    await _restart(replica)
    await _probe(ctx, record, started)
    return record


# --------------------------------------------------------------------------- servers


async def _undelivered_since(cluster: Cluster, since: float) -> list[str]:
    """Waiting jobs whose dispatch was published after ``since`` (database clock)."""
    pool = await cluster.db()
    rows = await pool.fetch(
        "SELECT DISTINCT j.id::text FROM jobs j JOIN outbox_events o"
        " ON o.aggregate_id = j.id::text AND o.event_type = 'job.dispatch'"
        " AND o.status = 'published' AND o.published_at > to_timestamp($1)"
        " WHERE j.status IN ('queued', 'retrying')",
        since,
    )
    return [r["id"] for r in rows]


async def nats_restart(ctx: FaultContext) -> FaultRecord:
    """Stop NATS and start it again on the same store."""
    record = FaultRecord("nats_restart", "nats", await ctx.cluster.db_now())
    started = time.monotonic()
    await ctx.cluster.restart_nats(lose_data=False, down_s=OUTAGE_S)
    await _probe(ctx, record, started)
    return record


async def nats_data_loss(ctx: FaultContext) -> FaultRecord:
    """Stop NATS, delete its JetStream store (streams, consumers, messages), start it: every
    dispatch message in the stream is gone; the reconciler must dispatch those jobs again.

    So that the loss certainly hits some, the workers are frozen (well within a lease)
    until their pull requests have expired, and a burst of jobs is created: their dispatch
    messages wait in the stream, delivered to no one, when the store goes."""
    cluster = ctx.cluster
    record = FaultRecord("nats_data_loss", "nats", await cluster.db_now())
    s = cluster.settings
    record.bound_s = s.redispatch_bound_s() + OUTAGE_S
    started = time.monotonic()
    workers = [w.process for w in cluster.workers if w.process is not None]
    for process in workers:
        process.signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(s.worker_fetch_timeout_s + 0.1)  # their pull requests expire
        since = await cluster.db_now()
        for _ in range(BURST):
            ctx.workload.submit(KINDS[0], ctx.key("burst"))
        await asyncio.sleep(BURST_WAIT_S)  # created and published, delivered to no one
        record.affected = await _undelivered_since(cluster, since)
        await asyncio.to_thread(cluster.nats.stop)
    finally:
        for process in workers:
            process.signal(signal.SIGCONT)
    record.notes.append(f"{len(record.affected)} undelivered dispatch messages lost")
    await cluster.restart_nats(lose_data=True, down_s=OUTAGE_S)
    await _probe(ctx, record, started)
    return record


async def postgres_restart(ctx: FaultContext) -> FaultRecord:
    """Fast shutdown of PostgreSQL (clients disconnected), then start it again."""
    record = FaultRecord("postgres_restart", "postgres", await ctx.cluster.db_now())
    started = time.monotonic()
    await ctx.cluster.restart_postgres(OUTAGE_S)
    await _probe(ctx, record, started)
    return record


async def duplicate_dispatch(ctx: FaultContext) -> FaultRecord:
    """Republish dispatch messages of jobs already delivered (running or finished), with
    fresh message ids so that JetStream's deduplication does not drop them."""
    pool = await ctx.cluster.db()
    rows = await pool.fetch(
        "SELECT id::text, queue, attempt_count FROM jobs WHERE attempt_count > 0"
        " ORDER BY updated_at DESC LIMIT $1",
        DUPLICATES,
    )
    record = FaultRecord("duplicate_dispatch", "nats", await ctx.cluster.db_now())
    nc = await nats.connect(nats_servers(ctx.cluster.nats.url))
    try:
        js = nc.jetstream()
        for n, row in enumerate(rows):
            body = json.dumps({"job_id": row["id"], "attempt": row["attempt_count"]}).encode()
            for copy in range(2):
                await js.publish(
                    dispatch_subject(row["queue"]),
                    body,
                    headers={MSG_ID_HEADER: f"chaos-dup:{row['id']}:{n}:{copy}"},
                )
    finally:
        await nc.close()
    record.notes.append(f"{2 * len(rows)} copies of {len(rows)} delivered dispatches")
    return record


FAULTS: dict[str, Callable[[FaultContext], Awaitable[FaultRecord]]] = {
    "worker_kill": worker_kill,
    "worker_pause": worker_pause,
    "service_kill_unpublished": service_kill_unpublished,
    "service_kill": service_kill,
    "nats_restart": nats_restart,
    "nats_data_loss": nats_data_loss,
    "postgres_restart": postgres_restart,
    "duplicate_dispatch": duplicate_dispatch,
    "worker_sigterm": worker_sigterm,
}
FAULT_KINDS = tuple(FAULTS)
