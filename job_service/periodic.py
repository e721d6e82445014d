"""Housekeeping loops: work done every so often, at once again while there is more.

The job service runs three: the lease reaper (ends attempts whose worker stopped
heartbeating; expiry is judged by the database clock, ``lock_until < now()``, never by this
process's clock), the outbox pruner (deletes published rows past their retention) and the
snapshot cleaner (deletes finished jobs' snapshots past their expiry). Every replica runs
them all; ``SKIP LOCKED`` and compare-and-set keep them off each other's
rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Periodic:
    """Calls ``work`` every ``interval_s``; ``work`` returns how many items it handled,
    and a full batch (``batch`` items) means it runs again at once."""

    def __init__(
        self,
        name: str,
        work: Callable[[], Awaitable[int]],
        *,
        interval_s: float,
        batch: int,
    ) -> None:
        self.name = name
        self._work = work
        self._interval_s = interval_s
        self._batch = batch
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                handled = await self._work()
                if handled:
                    log.info("%s: %d handled", self.name, handled)
                if handled >= self._batch:
                    continue  # there is more
            except Exception:
                log.exception("%s failed; retrying", self.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._interval_s)

    def stop(self) -> None:
        self._stopping.set()
