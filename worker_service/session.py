"""The worker's session with the job service: one stream, held for the worker's whole life
and opened again at once whenever it breaks (with a balanced target, possibly on another
replica). Every session names this process by its incarnation, drawn once per process: the
job service takes a session of another incarnation under the same worker id as this
process's end (a restart) and ends its leases at once, while an interruption of this
process's session, reopened by the same incarnation, ends nothing. So the worker takes no
lease before its first session is open (``registered``), and a clean shutdown ends with
``close()``, after every job was finished or handed back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

from shared.lifetime import Lifetime
from worker_service.domain.errors import is_transient
from worker_service.ports import SessionApi, SlotReports

log = logging.getLogger(__name__)

# Between two attempts to open the session: short, since the job service waits well under
# a second for it, and bounded below so a refusing server is not hammered.
RECONNECT_DELAYS_S = (0.0, 0.02, 0.05, 0.1, 0.2)
# How long a goodbye may take before the worker exits anyway (its leases are handed back).
GOODBYE_TIMEOUT_S = 2.0


class WorkerSession(Lifetime):
    """``run()`` holds the session until ``close()``; ``close()`` says goodbye (when a
    session is open) and is idempotent; ``async with`` runs it for the block."""

    def __init__(
        self,
        api: SessionApi,
        worker_id: str,
        slots: SlotReports | None = None,
        reopened: Callable[[], None] | None = None,
    ) -> None:
        """``slots``: reported on every session, for the grants pushed down it (ADR 0009).
        ``reopened``: called when a session opens after an earlier one ended (the job
        service may have ended this process's leases meanwhile: its reconnect grace)."""
        self._api = api
        self._reopened = reopened
        self._slots = slots
        self._worker_id = worker_id
        # this process (one WorkerSession per worker process): random, never reused
        self.incarnation = uuid.uuid4().hex
        self._goodbye = asyncio.Event()
        self._finished = asyncio.Event()
        self._started = False
        self._task: asyncio.Task[None] | None = None
        self.session_id: str | None = None
        self.opened = asyncio.Event()
        # set once the first session is registered, never cleared: leases may be taken
        self.registered = asyncio.Event()

    async def run(self) -> None:
        self._started = True
        failures = 0
        try:
            while not self._goodbye.is_set():
                try:
                    await self._api.hold_session(
                        self._worker_id, self.incarnation, self._goodbye, self._opened, self._slots
                    )
                    return  # said goodbye
                except Exception as exc:
                    had_session, self.session_id = self.session_id is not None, None
                    self.opened.clear()
                    failures = 0 if had_session else failures + 1
                    level = logging.DEBUG if is_transient(exc) and not had_session else logging.INFO
                    log.log(level, "worker %s: session ended (%s); reopening", self._worker_id, exc)
                delay = RECONNECT_DELAYS_S[min(failures, len(RECONNECT_DELAYS_S) - 1)]
                if delay:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._goodbye.wait(), delay)
        finally:
            self._finished.set()

    async def close(self) -> None:
        """Say goodbye and wait until the session ended (bounded). Safe before ``run()``."""
        self._goodbye.set()
        if self._started:
            try:
                await asyncio.wait_for(self._finished.wait(), GOODBYE_TIMEOUT_S + 1.0)
            except TimeoutError:
                log.warning("worker %s: the session did not close in time", self._worker_id)

    def _opened(self, session_id: str) -> None:
        self.session_id = session_id
        self.opened.set()
        log.info("worker %s: session %s open", self._worker_id, session_id)
        if self.registered.is_set() and self._reopened is not None:
            self._reopened()
        self.registered.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name=f"session-{self._worker_id}")

    async def stop(self) -> None:
        """``close()``, then end ``run()`` even if the goodbye did not get through in time."""
        await self.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
