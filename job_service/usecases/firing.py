"""The firing loop of every job_service replica: schedule rounds when a slot is due.

It sleeps until the earliest ``next_fire_at`` of any schedule (at most MAX_SLEEP_S, so a
schedule created or resumed on another replica is seen within it; at once when this
replica changed one), then runs PARALLEL_ROUNDS firing rounds at once
(``Schedules.fire_due``); they, and the other replicas' rounds, split the due schedules by
``SKIP LOCKED``. A full round means more are due: the next rounds follow at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

from job_service.usecases.schedule_rounds import FIRE_BATCH
from job_service.usecases.schedules import Schedules

log = logging.getLogger(__name__)

PARALLEL_ROUNDS = 3
MAX_SLEEP_S = 1.0
# When the next slot is due but held by another replica's round: look again shortly.
BUSY_SLEEP_S = 0.02


class ScheduleFiring:
    """The firing loop of one replica: a round when the next slot is due (or a schedule
    changed here), else asleep up to MAX_SLEEP_S."""

    def __init__(self, schedules: Schedules) -> None:
        self._schedules = schedules
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        changed = self._schedules.changed
        while not self._stopping.is_set():
            wait = MAX_SLEEP_S
            try:
                changed.clear()
                now = datetime.now(UTC)
                rounds = await asyncio.gather(
                    *(self._schedules.fire_due(now) for _ in range(PARALLEL_ROUNDS)),
                    return_exceptions=True,
                )
                for failed in (r for r in rounds if isinstance(r, BaseException)):
                    log.error("schedule firing round failed; retrying", exc_info=failed)
                full = any(r == FIRE_BATCH for r in rounds if isinstance(r, int))
                wait = 0.0 if full else await self._until_next()
            except Exception:
                log.exception("schedule firing failed; retrying")
            if wait <= 0:
                continue
            stop = asyncio.ensure_future(self._stopping.wait())
            change = asyncio.ensure_future(changed.wait())
            try:
                await asyncio.wait({stop, change}, timeout=wait, return_when="FIRST_COMPLETED")
            finally:
                for waiter in (stop, change):
                    waiter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await waiter

    async def _until_next(self) -> float:
        due = await self._schedules.next_due()
        if due is None:
            return MAX_SLEEP_S
        wait = (due - datetime.now(UTC)).total_seconds()
        # due already: another replica's round holds it (its commit moves it on)
        return BUSY_SLEEP_S if wait <= 0 else min(wait, MAX_SLEEP_S)

    def stop(self) -> None:
        self._stopping.set()
