"""A fake ``PartialOutputFeed``: pieces of partial output a test publishes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from job_service.ports.partials import PieceSink


class FakePartialOutputFeed:
    """``PartialOutputFeed`` whose pieces come from ``publish`` (delivered at once, to the
    job's open subscription); records each job subscribed to. ``sinks``: the open
    subscriptions."""

    def __init__(self) -> None:
        self.sinks: dict[str, PieceSink] = {}
        self.subscribed: list[str] = []

    @asynccontextmanager
    async def subscribe(self, job_id: str, deliver: PieceSink) -> AsyncIterator[None]:
        self.subscribed.append(job_id)
        self.sinks[job_id] = deliver
        try:
            yield
        finally:
            del self.sinks[job_id]

    def publish(self, job_id: str, data: bytes) -> None:
        """What the worker's publication of a piece does (the test's side)."""
        self.sinks[job_id](data)
