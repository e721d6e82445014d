"""Agent jobs in the chaos workload (issue 45), and their check.

An ``agent`` job (``tests/support/agent_jobtypes.py``) makes an effect (``ctx.step``
``reserve``), sleeps durably for a drawn time, waits durably for the signal ``approve``, and
makes a second effect (``charge``). The client sends ``approve`` a moment after the create is
acknowledged (before, during or after the sleep), retried across the replicas with an
idempotency key until one acknowledges it. Every effect appends its step's idempotency key
and the time of the call to the run's effects file, the external system.

The check, after the run, against what users and that system see:

- **an effect made again after it was recorded** (duplicated): a call of a step's key later
  than the step's record (``job_step_results.created_at``, the same machine's clock) by the
  recording attempt or a later one means an attempt ran a recorded step instead of
  returning its record. A call before the record is a worker that died between its effect
  and its record: the retry calls again with the same key, which a system deduplicating by
  key applies once. So is a late call by an *earlier* attempt: a worker paused past its
  lease (SIGSTOP) that resumed between the step's lease check and its call (long seed 9989:
  twice in 359 agents), which only the key can deduplicate; those are counted.
- **an effect recorded without its call** (lost).
- **a sleeper that went on early**: its code went on past the sleep before the time it
  recorded; **asleep twice**: a job suspended for its sleep more than once (it ran before
  its time and slept again); **late beyond its bound**: it went on later after its wake
  time than the slowest pick-up of an ordinary job of its queue in the run (a waking job
  waits its turn like any other) plus a lost dispatch's and a dead worker's recovery.
- **a lost approval**: a succeeded agent whose wait returned no signal although the signal
  was acknowledged (its wait lasts far longer than the run: only a lost wake ends it).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import grpc

from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.agent_jobtypes import APPROVAL
from tests.support.agent_jobtypes import DEFINITION as AGENT

if TYPE_CHECKING:
    from tests.chaos.checker import Report
    from tests.chaos.workload import Submission

EFFECTS_FILE = "effects.log"
SLEEP_S = (0.0, 4.0)
# the wait outlasts any run: only the signal (or a lost one) ends it
WAIT_S = 600.0
APPROVE_AFTER_S = (0.0, 5.0)
CALL_TIMEOUT_S = 3.0
GIVE_UP_S = 30.0
FINAL_REASONS = {"JOB_FINISHED", "JOB_NOT_FOUND"}
# the ordinals of the effects in the agent's code (reserve, plan, sleep, signal_wait,
# signal, charge)
EFFECTS = {0: "reserve", 5: "charge"}
AGENT_QUEUE = str(AGENT.queue)

OUTPUTS = """
SELECT id::text AS id, status, validated_output FROM jobs WHERE id = ANY($1::uuid[])
"""
SLEEPS = """
SELECT job_id::text AS job_id, count(*) AS n FROM job_events
WHERE job_id = ANY($1::uuid[]) AND reason = 'SUSPENDED_SLEEP' GROUP BY job_id
"""
# the slowest pick-up of a job of the agents' queue created to run at once (its first
# running event after its creation), other than an agent
SLOWEST_PICKUP = """
SELECT coalesce(max(extract(epoch FROM e.first - j.created_at)), 0) FROM jobs j
JOIN LATERAL (SELECT min(created_at) AS first FROM job_events
              WHERE job_id = j.id AND to_status = 'running') e ON true
WHERE j.queue = $1 AND j.job_type <> 'agent' AND e.first IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM job_events c WHERE c.job_id = j.id AND c.to_status = 'created')
"""
RECORDS = """
SELECT job_id::text AS job_id, ordinal, attempt, extract(epoch FROM created_at) AS recorded_at
FROM job_step_results WHERE job_id = ANY($1::uuid[]) AND ordinal = ANY($2::int[])
"""


def draw_input(rng: random.Random) -> dict[str, Any]:
    return {"sleep_s": round(rng.uniform(*SLEEP_S), 3), "wait_s": WAIT_S}


async def send_approval(
    next_stub: Callable[[], job_service_pb2_grpc.JobServiceStub],
    sub: Submission,
    rng: random.Random,
) -> None:
    """Sends ``approve`` a moment after the create, recording its acknowledgement in
    ``sub.signals``."""
    assert sub.job_id is not None
    await asyncio.sleep(rng.uniform(*APPROVE_AFTER_S))  # the person's own pace
    request = jpb.SendSignalRequest(
        job_id=sub.job_id,
        user_id=sub.user_id,
        name=APPROVAL,
        payload=struct_from_dict({"by": sub.key}),
        idempotency_key=f"{sub.key}:{APPROVAL}",
    )
    deadline = time.monotonic() + GIVE_UP_S
    delay = 0.1
    while True:
        try:
            await next_stub().SendSignal(request, timeout=CALL_TIMEOUT_S)
            sub.signals[APPROVAL] = (1, time.time())
            return
        except grpc.aio.AioRpcError as exc:
            error = error_from_rpc(exc)
            reason = error.reason.value if error is not None else exc.code().name
            if reason in FINAL_REASONS:
                return
            sub.errors.append(f"approve: {reason}")
        if time.monotonic() + delay > deadline:
            return
        await asyncio.sleep(delay)  # backoff between tries of a failed call
        delay = min(delay * 2, 1.0)


def read_calls(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """The effects file: each key with the (attempt, time) of each call."""
    calls: dict[str, list[tuple[int, float]]] = defaultdict(list)
    path = log_dir / EFFECTS_FILE
    if path.exists():
        for line in path.read_text().splitlines():
            key, attempt, at = line.split(" ")
            calls[key].append((int(attempt), float(at)))
    return calls


async def check(
    pool: asyncpg.Pool,
    submissions: list[Submission],
    report: Report,
    log_dir: Path,
    recovery_s: float,
) -> None:
    """``recovery_s``: how long a lost dispatch and a dead worker may hold a job up."""
    agents = {s.job_id: s for s in submissions if s.kind.job_type == "agent" and s.job_id}
    if not agents:
        return
    calls = await asyncio.to_thread(read_calls, log_dir)
    recorded = {
        (r["job_id"], r["ordinal"]): (r["attempt"], float(r["recorded_at"]))
        for r in await pool.fetch(RECORDS, list(agents), list(EFFECTS))
    }
    succeeded = repeated = stale = 0
    for row in await pool.fetch(SLEEPS, list(agents)):
        if row["n"] > 1:
            report.violations.append(
                f"{agents[row['job_id']].key} (agent) job {row['job_id']}: suspended for its"
                f" sleep {row['n']} times (ran before its wake time)"
            )
    late_bound = float(await pool.fetchval(SLOWEST_PICKUP, AGENT_QUEUE)) + recovery_s
    lateness: list[float] = []
    for row in await pool.fetch(OUTPUTS, list(agents)):
        job_id, sub = row["id"], agents[row["id"]]
        what = f"{sub.key} (agent) job {job_id}"
        for ordinal, name in EFFECTS.items():
            key = f"{job_id}/{ordinal}/{name}"
            record = recorded.get((job_id, ordinal))
            made = calls.get(key, [])
            repeated += max(0, len(made) - 1)
            if record is not None:
                by, at = record
                late = [(a, t) for a, t in made if t > at]
                stale += sum(1 for a, _ in late if a < by)
                replayed_not = [t for a, t in late if a >= by]
                if replayed_not:
                    report.duplicated.append(
                        f"{what}: step {name} called again {replayed_not[0] - at:.3f}s after "
                        f"attempt {by} recorded it, by attempt {by} or a later one"
                    )
            if record is not None and not made:
                report.lost.append(f"{what}: step {name} recorded without its effect")
        if row["status"] != "succeeded":
            continue
        succeeded += 1
        output = row["validated_output"]
        output = json.loads(output) if isinstance(output, str) else output
        if output["woke"] < output["until"]:
            report.violations.append(
                f"{what}: went on {output['until'] - output['woke']:.3f}s before its wake time"
            )
        lateness.append(output["woke"] - output["until"])
        if lateness[-1] > late_bound:
            report.violations.append(
                f"{what}: went on {lateness[-1]:.3f}s after its wake time (bound {late_bound:.1f}s)"
            )
        if APPROVAL in sub.signals and output["approval"] is None:
            report.lost.append(f"{what}: {APPROVAL} acknowledged, the wait returned none")
    report.notes.append(
        f"agents: {len(agents)} jobs with durable steps, a sleep and a signal wait, "
        f"{succeeded} succeeded; {sum(map(len, calls.values()))} effects made, {repeated} "
        "made again under the same key (a worker died between an effect and its record), "
        f"{stale} of them by a stale attempt after the record (a worker paused past its lease)"
        f"; sleepers late by {_spread(lateness)} (bound {late_bound:.1f}s)"
    )


def _spread(values: list[float]) -> str:
    if not values:
        return "- (none woke)"
    ordered = sorted(values)
    p50, p99 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]
    return f"p50 {p50:.3f}s p99 {p99:.3f}s max {ordered[-1]:.3f}s"
