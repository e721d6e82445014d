"""WatchJob: the current state of a job, then each change, until it ends.

How changes are seen: the database is the truth, and any replica (or a worker talking to
another replica) may change a job, so each replica polls — but once per interval for all of
its watchers together (``poll``: one indexed query over the watched ids, comparing status,
progress, attempt and ``updated_at``), never once per watcher. A watcher is woken when the
row differs from the state it last sent, so a change between its first read and the first
poll is not missed, and then reads the whole job again. Latency is at most one interval
(``JOBS_WATCH_POLL_INTERVAL_S``, 0.25 s by default); the cost is one small query per
interval per replica while anyone watches, and nothing when no one does.

Partial output (``include_partial_output``): the watcher also subscribes to the job's
partial-output feed (before its first read) and passes each piece on as it arrives, between
the job's states. Pieces are opaque here, never stored or logged; a watcher that falls
behind keeps only the newest ``MAX_PENDING_PIECES`` (the client sees a gap in ``seq``).
Pieces that come after the job's terminal state are not sent: its output is the truth.
A job whose type redacts output fields gets no pieces at all (``shared.redaction``: its
worker streams none, and pieces published for it anyway are dropped here).

A replica that shuts down ends its watches at once with UNAVAILABLE (PLATFORM_UNAVAILABLE),
instead of holding its shutdown for the grace period: the client watches again, on another
replica, and gets the current state first as always.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from job_service import metrics
from job_service.domain.declared_types import JobTypes
from job_service.domain.jobs import Job
from job_service.ports.listing import JobListingStore
from job_service.ports.partials import PartialOutputFeed
from shared import redaction
from shared.errors import JobNotFound, PlatformUnavailable

log = logging.getLogger(__name__)

# Pieces of partial output held for one watcher that reads slower than they come.
MAX_PENDING_PIECES = 256


def fingerprint(job: Job) -> tuple[Any, ...]:
    """What the poll compares; the same shape as ``JobListingStore.fingerprints``."""
    return (job.status.value, job.progress, job.attempt_count, job.updated_at)


class _Watcher:
    def __init__(self) -> None:
        self.seen: tuple[Any, ...] | None = None
        # set by the poll when the job's row differs from ``seen``
        self.stale = False
        # set by the poll, by a piece of partial output, and by close()
        self.wake = asyncio.Event()
        self.pieces: deque[bytes] = deque()
        # False once the job is known to be of a type whose partial output is never relayed
        self.relaying = True

    def changed(self) -> None:
        self.stale = True
        self.wake.set()

    def piece(self, data: bytes) -> None:
        if not self.relaying:
            return
        if len(self.pieces) >= MAX_PENDING_PIECES:
            self.pieces.popleft()
            metrics.partial_output_dropped()
        self.pieces.append(data)
        self.wake.set()


class WatchHub:
    def __init__(
        self,
        listing: JobListingStore,
        partials: PartialOutputFeed | None = None,
        registry: JobTypes | None = None,
    ) -> None:
        """``registry``: the job types whose partial output may be relayed (none without)."""
        self._listing = listing
        self._partials = partials
        self._registry = registry if registry is not None else JobTypes()
        self._watchers: dict[str, set[_Watcher]] = {}
        self._closed = False

    def close(self) -> None:
        """Ends every watch (and refuses new ones): the replica is shutting down."""
        self._closed = True
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.wake.set()

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
                    watcher.changed()
        return 0

    async def watch(
        self,
        job_id: str,
        read: Callable[[], Awaitable[Job | None]],
        *,
        partial_output: bool = False,
    ) -> AsyncIterator[Job | bytes]:
        """``read()`` once now and again after each change; ends after a terminal state
        (or when the job is gone). With ``partial_output``, the job's pieces of partial
        output (encoded ``PartialOutput`` messages) come in between. The caller has checked
        that the watcher may see the job before it asks for its partial output."""
        watcher = _Watcher()
        async with self._feed(job_id, watcher, partial_output):
            job = await read()
            if job is None:
                raise JobNotFound("no such job")
            if self._closed:
                raise _shutting_down()
            definition = redaction.definition_of(self._registry, job.job_type)
            if not redaction.relays_partial_output(definition):
                watcher.relaying = False
                watcher.pieces.clear()
            watcher.seen = fingerprint(job)
            self._watchers.setdefault(job_id, set()).add(watcher)
            try:
                yield job
                while not job.status.terminal:
                    await watcher.wake.wait()
                    watcher.wake.clear()
                    if self._closed:
                        raise _shutting_down()
                    while watcher.pieces:
                        metrics.partial_output_forwarded()
                        yield watcher.pieces.popleft()
                    if not watcher.stale:
                        continue
                    watcher.stale = False
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

    def _feed(
        self, job_id: str, watcher: _Watcher, wanted: bool
    ) -> AbstractAsyncContextManager[None]:
        if not wanted or self._partials is None:
            return contextlib.nullcontext()
        return self._partials.subscribe(job_id, watcher.piece)


def _shutting_down() -> PlatformUnavailable:
    return PlatformUnavailable("this server is shutting down; watch the job again")
