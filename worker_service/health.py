"""The worker's health, served over HTTP beside ``/metrics`` (the worker has no gRPC
server for the standard health service):

- ``/livez``: the event loop is turning (a tick within ``stall_s``). A wedged loop heartbeats
  nothing and fetches nothing: restarting the process is the cure, and its jobs run again
  elsewhere once their leases expire.
- ``/readyz``: consuming: connected, NATS connected, not shutting down.

The checks run on the HTTP server's thread and only read what the loop wrote.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

TICK_S = 1.0
STALL_S = 30.0


class WorkerHealth:
    """Liveness from a ticking task, readiness from flags the app sets."""

    def __init__(self, *, tick_s: float = TICK_S, stall_s: float = STALL_S) -> None:
        self.tick_s = tick_s
        self.stall_s = stall_s
        self._last_tick = time.monotonic()
        self._consuming = False
        self._connected: Callable[[], bool] = lambda: False

    def consuming(self, connected: Callable[[], bool]) -> None:
        """The worker consumes now; ``connected`` says whether NATS still is."""
        self._connected = connected
        self._consuming = True

    def stopping(self) -> None:
        self._consuming = False

    def live(self) -> bool:
        return time.monotonic() - self._last_tick < self.stall_s

    def ready(self) -> bool:
        return self._consuming and self.live() and self._connected()

    def endpoints(self) -> dict[str, Callable[[], bool]]:
        return {"/livez": self.live, "/readyz": self.ready}

    async def run(self) -> None:
        """Ticks until cancelled."""
        while True:
            self._last_tick = time.monotonic()
            await asyncio.sleep(self.tick_s)  # the tick itself: a stalled loop misses it
