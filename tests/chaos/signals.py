"""Signal-waiting jobs in the chaos workload, and their check.

A ``signalled`` job is a synthetic job that waits for two signals, ``first`` and
``second``. The client sends ``first`` as soon as the create is acknowledged (often before
the job has started: it must be kept) and ``second`` a moment later (while it runs, or
while its worker is being killed: a retried attempt must see both again). Each send is
retried across the replicas with an idempotency key until a replica acknowledges it, so a
signal counts as sent only once the service said so.

The check, after the run: a succeeded ``signalled`` job's output lists the signals its
last attempt received; every acknowledged signal must be there exactly once, in send
order, with its payload (missing: lost; twice: duplicated). A job that failed waiting for
a signal acknowledged well before it gave up lost that signal.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg
import grpc

from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc

if TYPE_CHECKING:
    from tests.chaos.checker import Report
    from tests.chaos.workload import Submission

NAMES = ("first", "second")
WAIT_TIMEOUT_MS = 20_000
SECOND_AFTER_S = (0.2, 2.0)
CALL_TIMEOUT_S = 3.0
GIVE_UP_S = 30.0
# A signal acknowledged this long before its job gave up waiting should have reached it.
LOST_SLACK_S = 3.0
# Refusals that are the service deciding (the job ended, e.g. a worker fault spent its
# attempts): the signal is not sent and not expected.
FINAL_REASONS = {"JOB_FINISHED", "JOB_NOT_FOUND"}

OUTPUTS = """
SELECT id::text AS id, status, validated_output, error_code, internal_error_message,
       extract(epoch FROM finished_at) AS finished_at
FROM jobs WHERE id = ANY($1::uuid[])
"""


def draw_input(rng: random.Random) -> dict[str, Any]:
    return {"wait_signals": list(NAMES), "signal_timeout_ms": WAIT_TIMEOUT_MS}


async def send_signals(
    next_stub: Callable[[], job_service_pb2_grpc.JobServiceStub],
    sub: Submission,
    rng: random.Random,
) -> None:
    """Sends ``first`` at once and ``second`` a moment later, recording each one a replica
    acknowledged in ``sub.signals`` (name → (payload value, wall-clock time))."""
    for i, name in enumerate(NAMES):
        if i:
            await asyncio.sleep(rng.uniform(*SECOND_AFTER_S))  # the client's own pace
        if not await _send(next_stub, sub, name, i + 1):
            return


async def _send(
    next_stub: Callable[[], job_service_pb2_grpc.JobServiceStub],
    sub: Submission,
    name: str,
    value: int,
) -> bool:
    assert sub.job_id is not None
    request = jpb.SendSignalRequest(
        job_id=sub.job_id,
        user_id=sub.user_id,
        name=name,
        payload=struct_from_dict({"v": value, "key": sub.key}),
        idempotency_key=f"{sub.key}:{name}",
    )
    deadline = time.monotonic() + GIVE_UP_S
    delay = 0.1
    while True:
        try:
            await next_stub().SendSignal(request, timeout=CALL_TIMEOUT_S)
            sub.signals[name] = (value, time.time())
            return True
        except grpc.aio.AioRpcError as exc:
            error = error_from_rpc(exc)
            reason = error.reason.value if error is not None else exc.code().name
            if reason in FINAL_REASONS:
                return False
            sub.errors.append(f"signal: {reason}")
        if time.monotonic() + delay > deadline:
            return False
        await asyncio.sleep(delay)  # backoff between tries of a failed call
        delay = min(delay * 2, 1.0)


async def check(pool: asyncpg.Pool, submissions: list[Submission], report: Report) -> None:
    """Adds lost and duplicated signals to ``report``, and a note of what was checked."""
    signalled = {
        s.job_id: s
        for s in submissions
        if s.kind.after_create is send_signals and s.signals and s.job_id is not None
    }
    rows = await pool.fetch(OUTPUTS, list(signalled))
    seen = 0
    for row in rows:
        sub = signalled[row["id"]]
        what = f"{sub.key} (signalled) job {row['id']}"
        sent = sorted(sub.signals.items(), key=lambda item: item[1][0])
        if row["status"] == "succeeded":
            output = row["validated_output"]
            output = json.loads(output) if isinstance(output, str) else output
            got = [(s["name"], s["payload"].get("v")) for s in output.get("signals") or []]
            expected = [(name, value) for name, (value, _) in sent]
            seen += len(got)
            extra = [g for g in got if got.count(g) > 1]
            if extra:
                report.duplicated.append(f"{what}: signals received twice: {sorted(set(extra))}")
            if [g for g in dict.fromkeys(got) if g in expected] != expected:
                report.lost.append(f"{what}: sent {expected}, the job received {got}")
        elif row["status"] == "failed" and row["error_code"] == "JOB_REJECTED":
            message = row["internal_error_message"] or ""
            for name, (_, acked_at) in sent:
                gave_up = float(row["finished_at"] or 0)
                if f"no signal {name!r}" in message and acked_at < gave_up - LOST_SLACK_S:
                    at = datetime.fromtimestamp(acked_at).isoformat(timespec="milliseconds")
                    report.lost.append(f"{what}: {name} acknowledged at {at}, never received")
    report.notes.append(
        f"signals: {sum(len(s.signals) for s in signalled.values())} acknowledged to "
        f"{len(signalled)} signal-waiting jobs; {seen} received by the succeeded ones"
    )
