"""Housekeeping loops: work done every so often, at once again while there is more.

Which rounds the job service runs, and how often, is listed in ``job_service.loops``.
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
