"""Agents under chaos (issue 45): a worker SIGKILLed between a durable step's side effect
and its record, and a worker SIGKILLed while many agents sleep. What must hold is checked
with every agent (tests/chaos/agents.py): each effect applied once per key, no effect made
again after its record, no sleeper early, late beyond its bound or asleep twice.

``kill_after_effect`` starts a worker with ``JOBS_CHAOS_KILL_AFTER_EFFECT=reserve,charge``
(worker_service/fault_hooks.py) and one slot per queue: it runs until one of an agent's
effects returned — written to the effects file — and kills itself before recording it. The
next attempt calls the effect again with the same key.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable

from tests.chaos import agents
from tests.chaos.faults import FaultContext, FaultRecord, _busiest_worker, _leased_by
from tests.chaos.step_faults import jobs_of, self_killing_worker
from tests.chaos.workload import KINDS, JobKind

# How long the worker gets to take an agent and make its first effect, while the fault
# creates an agent every FEED_EVERY_S (a quiet run's few agents may all go elsewhere).
EFFECT_WAIT_S = 30.0
FEED_EVERY_S = 0.5
# kill_sleeping creates SLEEPERS agents that sleep long enough to be killed among, and
# waits (at most SLEEPERS_WAIT_S) for MIN_SLEEPERS of them asleep at once.
SLEEPERS = 12
SLEEP_S = (6.0, 10.0)
SLEEPERS_WAIT_S = 20.0
MIN_SLEEPERS = 8
AGENT = next(kind for kind in KINDS if kind.job_type == "agent")
# an agent of the workload's kind (checked with the others) that sleeps longer
SLEEPY = JobKind(
    "agent-asleep",
    0,
    "agent",
    lambda rng: {"sleep_s": round(rng.uniform(*SLEEP_S), 3), "wait_s": agents.WAIT_S},
    frozenset({"succeeded", "failed"}),
    after_create=agents.send_approval,
)
ASLEEP = """
SELECT count(*) FROM jobs WHERE job_type = 'agent' AND status = 'retrying'
  AND error_code = 'SUSPENDED_SLEEP' AND next_run_at > now()
"""


async def kill_after_effect(ctx: FaultContext) -> FaultRecord:
    """A worker that SIGKILLs itself right after its first durable step's effect, before
    the record; the agent it held must run again and make the effect under the same key."""
    c = ctx.cluster
    feeding = asyncio.create_task(_feed_agents(ctx))  # work for it, as the others get some
    try:
        worker_id, code = await self_killing_worker(
            ctx, "JOBS_CHAOS_KILL_AFTER_EFFECT", EFFECT_WAIT_S, ",".join(agents.EFFECTS.values())
        )
    finally:
        feeding.cancel()
    record = FaultRecord("kill_after_effect", worker_id, await c.db_now())
    record.bound_s = c.settings.worker_recovery_bound_s()
    if code is None:
        record.notes.append(f"no durable step in {EFFECT_WAIT_S:.0f} s: not killed")
    elif code != -9:
        record.violations.append(f"exited {code}, not by its SIGKILL")
    else:
        record.affected = await jobs_of(await c.db(), worker_id)
        record.notes.append(
            f"killed between an effect and its record, holding {len(record.affected)} jobs"
        )
    return record


async def _feed_agents(ctx: FaultContext) -> None:
    """Creates an agent every FEED_EVERY_S until cancelled."""
    while True:
        ctx.workload.submit(AGENT, ctx.key("effect"))
        await asyncio.sleep(FEED_EVERY_S)  # the pace of the feed


async def kill_sleeping(ctx: FaultContext) -> FaultRecord:
    """SIGKILL a worker (and start a new one) while many agents sleep: they hold no lease
    on it, so none is held back, and each must still wake on time, once."""
    c = ctx.cluster
    for _ in range(SLEEPERS):
        ctx.workload.submit(SLEEPY, ctx.key("asleep"))
    pool = await c.db()
    deadline = time.monotonic() + SLEEPERS_WAIT_S
    asleep = int(await pool.fetchval(ASLEEP))
    while asleep < MIN_SLEEPERS and time.monotonic() < deadline:
        await asyncio.sleep(0.2)  # poll for sleepers, bounded by the deadline
        asleep = int(await pool.fetchval(ASLEEP))
    worker = await _busiest_worker(ctx)
    victim = worker.worker_id
    record = FaultRecord("kill_sleeping", victim, await c.db_now())
    # the jobs it held must run again, held to no time bound here: the fault is about the
    # sleepers (their wake is checked with every agent), and the burst it created shares
    # their queue (long seed 57287: one came back after 9.3 s; worker_kill holds the same
    # event to the lease's bound)
    record.affected = await _leased_by(c, victim)
    assert worker.process is not None
    worker.process.signal(signal.SIGKILL)
    await worker.process.wait(10)
    worker.start()
    record.notes.append(f"killed while {asleep} agents slept")
    return record


AGENT_FAULTS: dict[str, Callable[[FaultContext], Awaitable[FaultRecord]]] = {
    "kill_after_effect": kill_after_effect,
    "kill_sleeping": kill_sleeping,
}
AGENT_FAULT_KINDS = tuple(AGENT_FAULTS)
