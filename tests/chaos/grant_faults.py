"""Grants ahead under chaos (issue 28, ADR 0009): the two moments a pushed grant can be
lost in, each made to happen rather than hoped for.

- ``worker_kill_pushed``   a worker frozen (SIGSTOP) while jobs are created, so that the
                           job service pushes grants down its session that it never reads
                           (a frozen worker calls no LockJobs: every lease it gains while
                           frozen was pushed), then SIGKILLed and replaced. Its jobs must
                           run again within the lease bound, once each.
- ``service_kill_pushing`` the replica holding the most worker sessions, sent SIGUSR1
                           (every replica of the run has ``JOBS_CHAOS_KILL_BEFORE_PUSH=
                           on-sigusr1``, job_service/fault_hooks.py): it SIGKILLs itself
                           right after committing grants for a waiting worker, before
                           sending them. No worker knows it holds those leases; they must
                           run again within the lease bound, and the replica's claimed
                           dispatch rows must be taken over.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from job_service.fault_hooks import KILL_LOG
from job_service.usecases.waiting_workers import REPORT_STALE_S
from tests.chaos.faults import KINDS, LEASED, FaultContext, FaultRecord, _probe

if TYPE_CHECKING:
    from tests.chaos.cluster import Replica

# How long the replica may take to push a grant once armed; how often a worker is frozen
# before it was pushed one (each try a window of REPORT_STALE_S).
PUSH_WAIT_S = 10.0
FREEZE_TRIES = 10
BURST = 6
BURST_EVERY_S = 0.3


async def _pushed_while_frozen(ctx: FaultContext, worker_id: str, since: float) -> list[str]:
    """Jobs leased by ``worker_id`` since ``since`` (database clock) while it was frozen."""
    pool = await ctx.cluster.db()
    rows = await pool.fetch(
        f"SELECT id::text FROM jobs WHERE {LEASED} AND locked_by = $1"
        " AND locked_at > to_timestamp($2)",
        worker_id,
        since,
    )
    return [r["id"] for r in rows]


async def worker_kill_pushed(ctx: FaultContext) -> FaultRecord:
    """Freeze a worker, create jobs at once (it is pushed grants only while its last slot
    report is fresh: 0.75 s), retry with a fresh report until it was pushed some, kill it."""
    c = ctx.cluster
    live = [w for w in c.workers if w.process and w.process.process.poll() is None]
    worker = ctx.rng.choice(live)
    assert worker.process is not None
    victim = worker.worker_id
    pushed: list[str] = []
    for _ in range(FREEZE_TRIES):
        frozen_at = await c.db_now()
        worker.process.signal(signal.SIGSTOP)
        for _ in range(BURST):
            ctx.workload.submit(KINDS[0], ctx.key("push"))
        await asyncio.sleep(REPORT_STALE_S)  # the window it can be pushed in, then look
        pushed = await _pushed_while_frozen(ctx, victim, frozen_at)
        if pushed:
            break
        worker.process.signal(signal.SIGCONT)
        await asyncio.sleep(REPORT_STALE_S)  # reports again before the next try
    record = FaultRecord("worker_kill_pushed", victim, await c.db_now())
    pool = await c.db()
    rows = await pool.fetch(f"SELECT id::text FROM jobs WHERE {LEASED} AND locked_by = $1", victim)
    record.affected = [r["id"] for r in rows]
    record.bound_s = c.settings.worker_recovery_bound_s()
    record.ai_bound_s = c.settings.ai_recovery_bound_s()
    record.notes.append(
        f"killed holding {len(record.affected)} jobs, {len(pushed)} pushed while frozen"
        if pushed
        else f"nothing pushed while frozen in {FREEZE_TRIES} tries; killed anyway"
    )
    if not pushed:
        record.violations.append("the frozen worker was pushed no grant: the fault did not happen")
    worker.process.signal(signal.SIGKILL)
    worker.process.signal(signal.SIGCONT)
    await worker.process.wait(10)
    worker.start()
    return record


async def service_kill_pushing(ctx: FaultContext) -> FaultRecord:
    """A replica that kills itself between a pushed grant's commit and its sending."""
    c = ctx.cluster
    replica = await replica_with_most_sessions(ctx)
    assert replica.process is not None
    replica.process.signal(signal.SIGUSR1)
    killed_at: float | None = None
    deadline = time.monotonic() + PUSH_WAIT_S
    while time.monotonic() < deadline:
        for _ in range(BURST):
            ctx.workload.submit(KINDS[0], ctx.key("push"))
        try:
            code = await replica.process.wait(BURST_EVERY_S)
        except subprocess.TimeoutExpired:
            continue
        if code == -signal.SIGKILL and KILL_LOG in replica.process.log():
            killed_at = await c.db_now()
        break
    record = FaultRecord("service_kill_pushing", replica.instance_id, killed_at or await c.db_now())
    started = time.monotonic()
    if killed_at is None:
        record.violations.append(
            f"{replica.instance_id} did not kill itself before a push within {PUSH_WAIT_S:.0f} s"
        )
        replica.process.signal(signal.SIGKILL)
        await replica.process.wait(10)
    else:
        # the grants it committed and never sent: leases no worker knows it holds
        pool = await c.db()
        rows = await pool.fetch(
            f"SELECT id::text FROM jobs WHERE {LEASED}"
            " AND locked_at > to_timestamp($1) - interval '1 second'",
            killed_at,
        )
        record.affected = [r["id"] for r in rows]
        record.notes.append(
            f"killed before sending; {len(record.affected)} jobs leased just before"
        )
    s = c.settings
    record.bound_s = max(
        s.worker_recovery_bound_s(), s.outbox_claim_ttl_s + s.outbox_poll_interval_s + s.SLACK_S
    )
    record.ai_bound_s = s.ai_recovery_bound_s()
    await replica.start()
    await _probe(ctx, record, started)
    return record


async def replica_with_most_sessions(ctx: FaultContext) -> Replica:
    """The replica most workers hold their sessions with: the one that pushes grants."""
    pool = await ctx.cluster.db()
    rows = await pool.fetch(
        "SELECT instance_id, count(*) AS n FROM worker_sessions WHERE closed_at IS NULL"
        " GROUP BY instance_id ORDER BY n DESC"
    )
    by_id = {r.instance_id: r for r in ctx.cluster.replicas}
    for row in rows:
        if row["instance_id"] in by_id:
            return by_id[row["instance_id"]]
    return ctx.rng.choice(ctx.cluster.replicas)


GRANT_FAULTS: dict[str, Callable[[FaultContext], Awaitable[FaultRecord]]] = {
    "worker_kill_pushed": worker_kill_pushed,
    "service_kill_pushing": service_kill_pushing,
}
GRANT_FAULT_KINDS = tuple(GRANT_FAULTS)
