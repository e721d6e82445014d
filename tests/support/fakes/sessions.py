"""A fake ``SessionStore``: the worker sessions' registry, over a ``FakeLeaseStore``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from job_service.ports.sessions import Registration
from tests.support.fakes.leases import FakeLeaseStore


class FakeSessionStore:
    """``SessionStore`` of one worker: session n is the n-th opened, and knows the
    incarnation of the one before it; its transactions are ``leases``' (``ending()``).
    Records the incarnation of each session in order (None: an older worker's) and each
    close (session, goodbye)."""

    def __init__(self, leases: FakeLeaseStore) -> None:
        self.leases = leases
        self.incarnations: list[str | None] = []
        self.closed: list[tuple[int, bool]] = []

    @asynccontextmanager
    async def open(
        self, worker_id: str, instance_id: str, incarnation: str
    ) -> AsyncIterator[Registration]:
        previous = self.incarnations[-1] if self.incarnations else None
        self.incarnations.append(incarnation or None)
        async with self.leases.ending() as tx:
            yield Registration(len(self.incarnations), previous, tx)

    async def close(self, session_id: int, *, goodbye: bool) -> None:
        self.closed.append((session_id, goodbye))

    @asynccontextmanager
    async def ending_leases(
        self, worker_id: str, session_id: int
    ) -> AsyncIterator[FakeLeaseStore | None]:
        async with self.leases.ending() as tx:
            yield None if len(self.incarnations) > session_id else tx
