"""WatchJob: the current state of a job, then each change, until it ends.

How changes are seen: the database is the truth, and any replica (or a worker talking to
another replica) may change a job, so each replica polls — but once per interval for all of
its watchers together (``poll``: one indexed query over the watched ids, comparing status,
progress, attempt and ``updated_at``), never once per watcher. A watcher is woken when the
row differs from the state it last sent, so a change between its first read and the first
poll is not missed, and then reads the whole job again. Latency is at most one interval
(``JOBS_WATCH_POLL_INTERVAL_S``, 0.25 s by default); the cost is one small query per
interval per replica while anyone watches, and nothing when no one does.

A replica that shuts down ends its watches at once with UNAVAILABLE (PLATFORM_UNAVAILABLE),
instead of holding its shutdown for the grace period: the client watches again, on another
replica, and gets the current state first as always.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from job_service.domain.models import Job
from job_service.ports.listing import JobListingStore
from shared.errors import JobNotFound, PlatformUnavailable

log = logging.getLogger(__name__)


def fingerprint(job: Job) -> tuple[Any, ...]:
    """What the poll compares; the same shape as ``JobListingStore.fingerprints``."""
    return (job.status.value, job.progress, job.attempt_count, job.updated_at)


class _Watcher:
    def __init__(self, seen: tuple[Any, ...]) -> None:
        self.seen = seen
        self.changed = asyncio.Event()


class WatchHub:
    def __init__(self, listing: JobListingStore) -> None:
        self._listing = listing
        self._watchers: dict[str, set[_Watcher]] = {}
        self._closed = False

    def close(self) -> None:
        """Ends every watch (and refuses new ones): the replica is shutting down."""
        self._closed = True
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.changed.set()

    @property
    def watching(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    async def poll(self) -> int:
        """One look at every watched job; wakes the watchers whose job changed."""
        if not self._watchers:
            return 0
        current = await self._listing.fingerprints(list(self._watchers))
        for job_id, watchers in list(self._watchers.items()):
            now = current.get(job_id)
            for watcher in watchers:
                if now is None or tuple(now) != watcher.seen:
                    watcher.changed.set()
        return 0

    async def watch(
        self, job_id: str, read: Callable[[], Awaitable[Job | None]]
    ) -> AsyncIterator[Job]:
        """``read()`` once now and again after each change; ends after a terminal state
        (or when the job is gone)."""
        job = await read()
        if job is None:
            raise JobNotFound("no such job")
        if self._closed:
            raise _shutting_down()
        watcher = _Watcher(fingerprint(job))
        self._watchers.setdefault(job_id, set()).add(watcher)
        try:
            yield job
            while not job.status.terminal:
                await watcher.changed.wait()
                watcher.changed.clear()
                if self._closed:
                    raise _shutting_down()
                fresh = await read()
                if fresh is None:
                    return  # deleted (retention) while watched
                if fingerprint(fresh) != watcher.seen:
                    job = fresh
                    watcher.seen = fingerprint(job)
                    yield job
        finally:
            watchers = self._watchers.get(job_id)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del self._watchers[job_id]


def _shutting_down() -> PlatformUnavailable:
    return PlatformUnavailable("this server is shutting down; watch the job again")
