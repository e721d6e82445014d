"""Checkpointed provider calls under chaos (issue 19, ADR 0007): workers SIGKILLed right
after a provider call returned, and the figure that says whether such a kill costs a
second call — provider calls per succeeded AI job, counted by the fake provider and by the
usage rows, which must agree and stay at or under ``MAX_CALLS_PER_JOB``.

The fault starts a worker with ``JOBS_CHAOS_KILL_AFTER_STEP=1`` (worker_service/
fault_hooks.py) and one slot per queue: it runs until its first provider call answered and
its step was recorded, then kills itself, holding the job whose call it paid for. The next
attempt of that job must reuse the recorded response: before checkpoints, each kill cost a
second call. The short profile injects it ``KILLS_PER_RUN`` times.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

from tests.chaos.faults import LEASED, FaultContext, FaultRecord
from tests.support.processes import WorkerProcess
from worker_service.adapters.fake_provider import ANSWER_LOG

# How long the worker gets to take an AI job and call the provider.
KILL_WAIT_S = 30.0
LEASE_END_WAIT_S = 10.0
# The bound: provider calls per succeeded job under this fault.
MAX_CALLS_PER_JOB = 1.05
# kill_after_call faults per short run (one worker killed each)
KILLS_PER_RUN = 6
_ANSWER = ANSWER_LOG.split("%")[0]


async def kill_after_call(ctx: FaultContext) -> FaultRecord:
    """A worker that SIGKILLs itself right after its first recorded provider call; the job
    it held must run again (and reuse the call)."""
    c = ctx.cluster
    worker_id, code = await self_killing_worker(ctx, "JOBS_CHAOS_KILL_AFTER_STEP", KILL_WAIT_S)
    record = FaultRecord("kill_after_call", worker_id, await c.db_now())
    record.bound_s = c.settings.ai_recovery_bound_s()  # it holds an AI job
    if code is None:
        record.notes.append(f"no provider call in {KILL_WAIT_S:.0f} s: not killed")
    elif code != -9:
        record.violations.append(f"exited {code}, not by its SIGKILL")
    else:
        record.affected = await jobs_of(await c.db(), worker_id)
        record.notes.append(
            f"killed right after a recorded provider call, holding {len(record.affected)} jobs"
        )
    return record


async def self_killing_worker(
    ctx: FaultContext, hook: str, wait_s: float, armed: str = "1"
) -> tuple[str, int | None]:
    """Starts a worker with one slot per queue and the fault hook ``hook`` (a
    worker_service/fault_hooks.py variable) set to ``armed``, and waits up to ``wait_s`` for
    it to kill itself: its id, and its exit code (None: alive then, and stopped)."""
    c = ctx.cluster
    worker_id = ctx.key("wk")  # a w*.log: the checker reads its fake provider lines
    process = WorkerProcess(
        c.log_dir,
        worker_id,
        c.nats.url,
        c.worker_target,
        **{**c.worker_env(), hook: armed, "JOBS_WORKER_SLOTS": "ai-interactive=1,ai-background=1"},
    )
    try:
        code = await process.wait(wait_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        process.close()
    return worker_id, code


async def jobs_of(pool: asyncpg.Pool, worker_id: str) -> list[str]:
    """The jobs a killed worker held, once the job service ended its leases."""
    deadline = time.monotonic() + LEASE_END_WAIT_S
    while time.monotonic() < deadline:
        held = await pool.fetchval(
            f"SELECT count(*) FROM jobs WHERE {LEASED} AND locked_by = $1", worker_id
        )
        if not held:
            break
        await asyncio.sleep(0.2)  # poll, bounded by the deadline
    rows = await pool.fetch(
        "SELECT DISTINCT job_id::text AS id FROM job_events"
        " WHERE worker_id = $1 AND reason IN ('WORKER_DISCONNECTED', 'LEASE_EXPIRED')",
        worker_id,
    )
    return [r["id"] for r in rows]


STEP_FAULTS: dict[str, Callable[[FaultContext], Awaitable[FaultRecord]]] = {
    "kill_after_call": kill_after_call,
}
# the short profile's schedule: the kills one after another, each measured on its own
STEP_FAULT_KINDS = ("kill_after_call",) * KILLS_PER_RUN


# succeeded jobs that called a provider (or reused a call): a job type on a model tier
# that calls none (the scheduler tests' ``metered``) has no usage row
SUCCEEDED_AI = """
SELECT j.id::text FROM jobs j
WHERE j.status = 'succeeded' AND EXISTS (SELECT 1 FROM usage_logs u WHERE u.job_id = j.id)
"""
CALL_ROWS = """
SELECT count(*) FILTER (WHERE NOT reused AND error_code IS NULL) AS answered,
       count(*) FILTER (WHERE reused) AS reused
FROM usage_logs WHERE job_id = ANY($1::uuid[])
"""
UNKNOWN = "SELECT count(*) FROM job_events WHERE usage_unknown AND job_id = ANY($1::uuid[])"


def answered_calls(log_dir: Path) -> Counter[str]:
    """Per job: the provider calls that answered, by the fake provider's log lines."""
    calls: Counter[str] = Counter()
    for path in sorted(log_dir.glob("w*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if _ANSWER not in line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a SIGKILL
            if isinstance(entry, dict) and entry.get("job_id"):
                calls[entry["job_id"]] += 1
    return calls


async def calls_per_job(pool: asyncpg.Pool, log_dir: Path) -> tuple[str, list[str]]:
    """The figure (a report row's detail) and its breaches: answered provider calls per
    succeeded AI job by the fake provider and by the usage rows (not reused, not failed).
    The two may differ only by calls of attempts killed before their usage reached the job
    service (marked usage-unknown)."""
    jobs = [r["id"] for r in await pool.fetch(SUCCEEDED_AI)]
    if not jobs:
        return "no AI job succeeded", []
    counted = await asyncio.to_thread(answered_calls, log_dir)
    by_fake = sum(counted[j] for j in jobs)
    rows = await pool.fetchrow(CALL_ROWS, jobs)
    assert rows is not None
    unknown = await pool.fetchval(UNKNOWN, jobs)
    per_fake, per_rows = by_fake / len(jobs), rows["answered"] / len(jobs)
    # each reuse is a call an attempt would have made again without its checkpoint
    without = (by_fake + rows["reused"]) / len(jobs)
    figure = (
        f"{per_fake:.3f} by the fake provider, {per_rows:.3f} by usage rows"
        f" ({by_fake} and {rows['answered']} calls for {len(jobs)} succeeded AI jobs);"
        f" {rows['reused']} recorded calls reused, not repeated ({without:.3f} without)"
    )
    breaches = []
    if not 0 <= by_fake - rows["answered"] <= unknown:
        breaches.append(
            f"checkpoints: the fake provider answered {by_fake} calls of succeeded AI jobs,"
            f" the usage rows bill {rows['answered']} ({unknown} attempts with unknown usage)"
        )
    if max(per_fake, per_rows) > MAX_CALLS_PER_JOB:
        breaches.append(
            f"checkpoints: {max(per_fake, per_rows):.3f} provider calls per succeeded AI job"
            f" (at most {MAX_CALLS_PER_JOB})"
        )
    return figure, breaches
