"""Agents under chaos (issue 45): a worker SIGKILLed between a durable step's side effect
and its record, and a worker SIGKILLed while many agents sleep. What must hold is checked
with every agent (tests/chaos/agents.py): each effect applied once per key, no effect made
again after its record, no sleeper early, late beyond its bound or asleep twice.

``kill_after_effect`` starts a worker with ``JOBS_CHAOS_KILL_AFTER_EFFECT=1`` (worker_service/
fault_hooks.py) and one slot per queue: it runs until the function of its first durable
step returned — an agent's ``reserve`` effect, written to the effects file — and kills
itself before recording it. The next attempt calls the effect again with the same key.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable

from tests.chaos.faults import FaultContext, FaultRecord, _busiest_worker, _leased_by
from tests.chaos.step_faults import jobs_of, self_killing_worker

# How long the worker gets to take an agent and make its first effect.
EFFECT_WAIT_S = 30.0
# kill_sleeping waits (at most this long) for this many agents asleep at once.
SLEEPERS_WAIT_S = 20.0
MIN_SLEEPERS = 3
ASLEEP = """
SELECT count(*) FROM jobs WHERE job_type = 'agent' AND status = 'retrying'
  AND error_code = 'SUSPENDED_SLEEP' AND next_run_at > now()
"""


async def kill_after_effect(ctx: FaultContext) -> FaultRecord:
    """A worker that SIGKILLs itself right after its first durable step's effect, before
    the record; the agent it held must run again and make the effect under the same key."""
    c = ctx.cluster
    worker_id, code = await self_killing_worker(ctx, "JOBS_CHAOS_KILL_AFTER_EFFECT", EFFECT_WAIT_S)
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


async def kill_sleeping(ctx: FaultContext) -> FaultRecord:
    """SIGKILL a worker (and start a new one) while agents sleep: they hold no lease on
    it, so none is held back, and each must still wake on time, once."""
    c = ctx.cluster
    pool = await c.db()
    deadline = time.monotonic() + SLEEPERS_WAIT_S
    asleep = int(await pool.fetchval(ASLEEP))
    while asleep < MIN_SLEEPERS and time.monotonic() < deadline:
        await asyncio.sleep(0.2)  # poll for sleepers, bounded by the deadline
        asleep = int(await pool.fetchval(ASLEEP))
    worker = await _busiest_worker(ctx)
    victim = worker.worker_id
    record = FaultRecord("kill_sleeping", victim, await c.db_now())
    record.affected = await _leased_by(c, victim)
    record.bound_s = c.settings.worker_recovery_bound_s()
    record.ai_bound_s = c.settings.ai_recovery_bound_s()
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
