"""The lease reaper: ends attempts whose worker stopped heartbeating.

Every replica runs one; ``SKIP LOCKED`` keeps them off each other's rows, and expiry is
judged by the database clock (``lock_until < now()``), never by this process's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class LeaseReaper:
    def __init__(self, reap: Callable[[], Awaitable[int]], *, interval_s: float) -> None:
        self._reap = reap
        self._interval_s = interval_s
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                reaped = await self._reap()
                if reaped:
                    log.info("reaped %d expired leases", reaped)
                    continue  # there may be more
            except Exception:
                log.exception("lease reaper failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._interval_s)

    def stop(self) -> None:
        self._stopping.set()
