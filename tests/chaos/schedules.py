"""Schedules under chaos: a 1-second schedule runs through every fault of the run, and the
checker's rule is that no slot fired twice and none was missed.

The schedule is created before the first fault (overlap ALLOW, so every slot creates a
job whatever its predecessor does; a catch-up window far longer than any fault keeps every
replica away) and paused after the last. Between its first and last fired slot every second
must have exactly one job, and no slot may be recorded as anything but fired.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TypeVar

import asyncpg
import grpc
from google.protobuf.duration_pb2 import Duration

from shared.grpc_client import aio_channel
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pb.jobs.v1 import schedule_service_pb2_grpc
from shared.pbconv import struct_from_dict
from tests.support.processes import client_config

USER = "chaos-schedule"
CALL_TIMEOUT_S = 3.0
GIVE_UP_S = 60.0
# far longer than any fault keeps the replicas away: every missed slot is caught up
CATCH_UP_WINDOW_S = 600
T = TypeVar("T")
Stub = schedule_service_pb2_grpc.ScheduleServiceStub

PER_SLOT = """
SELECT scheduled_for, count(*) AS n FROM jobs WHERE schedule_id = $1
GROUP BY scheduled_for ORDER BY scheduled_for
"""
NOT_FIRED = """
SELECT outcome, count(*) AS n FROM schedule_runs WHERE schedule_id = $1 AND outcome <> 'fired'
GROUP BY outcome
"""


class ScheduledLoad:
    """One schedule firing every second for the length of the run."""

    def __init__(self, targets: list[str]) -> None:
        self._targets = targets
        self.schedule_id = ""

    async def start(self) -> None:
        made = await self._call(
            lambda stub: stub.CreateSchedule(
                spb.CreateScheduleRequest(
                    user_id=USER,
                    idempotency_key="chaos-every-second",
                    spec=spb.ScheduleSpec(
                        cron="* * * * * *",
                        job_template=spb.JobTemplate(
                            job_type="synthetic", input=struct_from_dict({"sleep_ms": 20})
                        ),
                        overlap_policy=spb.OVERLAP_POLICY_ALLOW,
                        catch_up_window=Duration(seconds=CATCH_UP_WINDOW_S),
                    ),
                ),
                timeout=CALL_TIMEOUT_S,
            )
        )
        self.schedule_id = made.schedule.id

    async def stop(self) -> None:
        if self.schedule_id:
            await self._call(
                lambda stub: stub.PauseSchedule(
                    spb.PauseScheduleRequest(schedule_id=self.schedule_id, user_id=USER),
                    timeout=CALL_TIMEOUT_S,
                )
            )

    async def _call(self, call: Callable[[Stub], Awaitable[T]]) -> T:
        """The call on the first replica that answers, retried until GIVE_UP_S."""
        deadline = time.monotonic() + GIVE_UP_S
        for target in itertools.cycle(self._targets):
            try:
                async with aio_channel(client_config(target)) as channel:
                    return await call(Stub(channel))
            except grpc.aio.AioRpcError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)  # a replica down: the next one, shortly
        raise AssertionError("unreachable")

    async def breaches(self, pool: asyncpg.Pool) -> tuple[int, list[str]]:
        """How many slots fired, and the violations: a slot fired twice, a slot missed."""
        if not self.schedule_id:
            return 0, ["schedule: never created"]
        slots = [(r["scheduled_for"], r["n"]) for r in await pool.fetch(PER_SLOT, self.schedule_id)]
        not_fired = {r["outcome"]: r["n"] for r in await pool.fetch(NOT_FIRED, self.schedule_id)}
        return len(slots), slot_breaches(slots, not_fired)


def slot_breaches(slots: list[tuple[datetime, int]], not_fired: dict[str, int]) -> list[str]:
    """The rule on a 1-second schedule's jobs per slot (oldest first) and its runs that did
    not fire: every slot once, no second missing between the first and the last."""
    found = [f"schedule: slot {t.isoformat()} fired {n} times" for t, n in slots if n != 1]
    found += [
        f"schedule: slots missed between {a.isoformat()} and {b.isoformat()}"
        for (a, _), (b, _) in itertools.pairwise(slots)
        if b - a != timedelta(seconds=1)
    ]
    found += [f"schedule: {n} slots recorded {outcome}" for outcome, n in not_fired.items()]
    if not slots:
        found.append("schedule: no slot fired")
    return found
