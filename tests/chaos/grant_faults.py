"""Grants ahead under chaos (issue 28, ADR 0009): the two moments a pushed grant can be
lost in, each made to happen rather than hoped for.

- ``worker_kill_pushed``   a worker frozen (SIGSTOP) while jobs are created, so that the
                           job service pushes grants down its session that it never reads
                           (a frozen worker calls no LockJobs: every lease it gains while
                           frozen was pushed), then SIGKILLed and replaced. Its jobs must
                           run again within the lease bound, once each.
- ``service_kill_pushing`` a replica restarted with ``JOBS_CHAOS_KILL_BEFORE_PUSH=1``
                           (job_service/fault_hooks.py): it SIGKILLs itself right after
                           committing grants for a waiting worker, before sending them. No
                           worker knows it holds those leases; they must run again within
                           the lease bound, and the replica's claimed dispatch rows must
                           be taken over.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable

from job_service.fault_hooks import KILL_BEFORE_PUSH, KILL_LOG
from tests.chaos.faults import KINDS, LEASED, FaultContext, FaultRecord, _probe

# How long the frozen worker may take to be pushed a grant, and the replica to push one.
PUSH_WAIT_S = 10.0
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
    """Freeze a worker, create jobs until the job service has pushed it some, kill it."""
    c = ctx.cluster
    live = [w for w in c.workers if w.process and w.process.process.poll() is None]
    worker = ctx.rng.choice(live)
    assert worker.process is not None
    victim = worker.worker_id
    frozen_at = (await c.db_now()).timestamp()
    worker.process.signal(signal.SIGSTOP)
    pushed: list[str] = []
    deadline = time.monotonic() + PUSH_WAIT_S
    while not pushed and time.monotonic() < deadline:
        for _ in range(BURST):
            ctx.workload.submit(KINDS[0], ctx.key("push"))
        await asyncio.sleep(BURST_EVERY_S)  # the pushes' time to arrive; bounded above
        pushed = await _pushed_while_frozen(ctx, victim, frozen_at)
    record = FaultRecord("worker_kill_pushed", victim, await c.db_now())
    pool = await c.db()
    rows = await pool.fetch(f"SELECT id::text FROM jobs WHERE {LEASED} AND locked_by = $1", victim)
    record.affected = [r["id"] for r in rows]
    record.bound_s = c.settings.worker_recovery_bound_s()
    record.ai_bound_s = c.settings.ai_recovery_bound_s()
    record.notes.append(
        f"killed holding {len(record.affected)} jobs, {len(pushed)} pushed while frozen"
        if pushed
        else f"nothing pushed in {PUSH_WAIT_S:.0f} s while frozen; killed anyway"
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
    replica = ctx.rng.choice(c.replicas)
    assert replica.process is not None
    replica.process.signal(signal.SIGKILL)
    await replica.process.wait(10)
    await replica.start(**{KILL_BEFORE_PUSH: "1"})
    killed_at = None
    started = time.monotonic()
    deadline = started + PUSH_WAIT_S
    while time.monotonic() < deadline:
        for _ in range(BURST):
            ctx.workload.submit(KINDS[0], ctx.key("push"))
        try:
            code = await replica.process.wait(BURST_EVERY_S)
        except subprocess.TimeoutExpired:
            continue
        killed_at = await c.db_now()
        if code != -signal.SIGKILL or KILL_LOG not in replica.process.log():
            killed_at = None  # it died of something else: reported below
        break
    record = FaultRecord("service_kill_pushing", replica.instance_id, killed_at or await c.db_now())
    started = time.monotonic()
    if killed_at is None:
        record.violations.append(
            f"{replica.instance_id} did not kill itself before a push within {PUSH_WAIT_S:.0f} s"
        )
    else:
        # the grants it committed and never sent: leases no worker knows it holds
        pool = await c.db()
        rows = await pool.fetch(
            f"SELECT id::text FROM jobs WHERE {LEASED} AND locked_at > $1 - interval '1 second'",
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


GRANT_FAULTS: dict[str, Callable[[FaultContext], Awaitable[FaultRecord]]] = {
    "worker_kill_pushed": worker_kill_pushed,
    "service_kill_pushing": service_kill_pushing,
}
GRANT_FAULT_KINDS = tuple(GRANT_FAULTS)
