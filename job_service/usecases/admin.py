"""Use cases beyond one job's own path: listings with page tokens, and the operator's
actions (read any job, re-run a finished one, list dead letters; their redrive is the
outbox's).

Everything a request must satisfy is checked here before anything is read or written;
servicers only translate protobuf.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from job_service.domain import checks
from job_service.domain.admission import readmit
from job_service.domain.checks import require_job_type, require_name, require_target, require_uuid
from job_service.domain.counts import JobCounts, require_window
from job_service.domain.declared_types import JobTypes
from job_service.domain.envelopes import INPUT
from job_service.domain.ids import new_job_id
from job_service.domain.jobs import Job
from job_service.domain.lifecycle import RERUNNABLE, JobStatus
from job_service.domain.outbox import DeadEvent
from job_service.domain.paging import PageTokens, page_size
from job_service.domain.selection import Cursor, JobFilter
from job_service.domain.workers import LiveWorker
from job_service.ports.jobs import JobStore, RerunStore
from job_service.ports.listing import JobListingStore
from job_service.ports.outbox import OutboxStore, Waker
from job_service.usecases.dependencies import DependencyStore
from job_service.usecases.jobs import with_withheld_fields
from job_service.usecases.sealing import Sealer
from shared.constants import Queue
from shared.errors import (
    FieldViolation,
    InvalidInput,
    JobNotFound,
    JobNotRetryable,
    LiveChildExists,
    LiveRetryExists,
)

log = logging.getLogger(__name__)

_JOBS = ("jobs",)
# job_events.reason holds 100 characters
TIMELINE_REASON_CHARS = 100
_DEAD_LETTERS = ("failed", "events")


class Admin:
    def __init__(
        self,
        registry: JobTypes,
        store: JobStore,
        reruns: RerunStore,
        listing: JobListingStore,
        dead_letters: OutboxStore,
        tokens: PageTokens,
        outbox: Waker,
        dependencies: DependencyStore,
        *,
        sealer: Sealer | None = None,
    ) -> None:
        """``sealer`` opens the payloads a read shows, and seals a re-run's copy of its
        source's input for the re-run (None: stored as they are)."""
        self._sealer = sealer or Sealer(None, None)
        self._dependencies = dependencies
        self._registry = registry
        self._store = store
        self._reruns = reruns
        self._listing = listing
        self._dead_letters = dead_letters
        self._tokens = tokens
        self._outbox = outbox

    # --- listings ----------------------------------------------------------------------

    async def list_user_jobs(
        self,
        user_id: str,
        requested_size: int,
        token: str,
        *,
        target_type: str = "",
        target_id: str = "",
        id_suffix: str = "",
    ) -> tuple[list[Job], str]:
        """One user's jobs (about a target, whose id ends with ``id_suffix``, when named),
        newest first; the token of the next page ('' at the end)."""
        require_name("user_id", user_id)
        where = JobFilter(
            user_id=user_id,
            target_type=target_type or None,
            target_id=target_id or None,
            id_suffix=checks.id_suffix(id_suffix),
        )
        return await self.list_jobs(where, requested_size, token)

    async def list_jobs(
        self, where: JobFilter, requested_size: int, token: str
    ) -> tuple[list[Job], str]:
        """Jobs matching ``where`` (any user's, for operators), a page at a time."""
        self.check_filter(where)
        size = page_size(requested_size)
        scope = {"listing": "jobs", **scope_of(where)}
        start = self._tokens.read(token, scope, _JOBS)["jobs"]
        # One row more than the page tells whether another page follows.
        jobs = await self._listing.list_jobs(where, None if start == "start" else start, size + 1)
        page, more = jobs[:size], len(jobs) > size
        last = Cursor(page[-1].created_at, page[-1].id) if more else None
        return await self._sealer.opened_all(page), self._tokens.issue(scope, {"jobs": last})

    def check_filter(self, where: JobFilter) -> None:
        if where.user_id is not None:
            require_name("user_id", where.user_id)
        if where.job_type is not None:
            require_job_type(where.job_type)
            self._registry.get(where.job_type)  # UNKNOWN_JOB_TYPE
        require_target(where.target_type or "", where.target_id or "")
        if where.queue is not None and where.queue not in set(Queue):
            raise InvalidInput(
                "no job type uses this queue",
                [FieldViolation("queue", "a queue of a registered job type")],
            )
        if (
            where.created_after is not None
            and where.created_before is not None
            and where.created_after >= where.created_before
        ):
            raise InvalidInput(
                "the creation-time range is empty",
                [FieldViolation("created_before", "must be later than created_after")],
            )

    # --- operators ---------------------------------------------------------------------

    async def count_jobs(self, since: datetime | None, until: datetime | None) -> JobCounts:
        """Exact counts of every user's jobs over [since, until) (until None: now)."""
        require_window(since, until)
        assert since is not None
        job_types = [d.job_type for d in self._registry]
        return await self._listing.count_jobs(since, until, job_types)

    async def live_workers(self) -> list[LiveWorker]:
        """The workers connected now, by worker id."""
        return await self._listing.live_workers()

    async def get_any_job(self, job_id: str) -> Job:
        require_uuid("job_id", job_id)
        job = await self._store.get(job_id, None)
        if job is None:
            raise JobNotFound("no such job")
        return with_withheld_fields(self._registry, await self._sealer.opened(job))

    async def retry_job(
        self,
        job_id: str,
        reason: str = "retry",
        *,
        idempotency_key: str = "",
        since: datetime | None = None,
    ) -> Job:
        """A new job from a failed or cancelled job's snapshot (trigger "retry"), with
        ``reason`` on its first timeline event: the copy admitted as CreateJob admits a
        job (``readmit``). One live retry per original job (LiveRetryExists); with
        ``idempotency_key``, the retry that key made when it made one; with ``since`` (a
        RetryJobs walk's start), none when the original was retried since then."""
        require_uuid("job_id", job_id)
        if idempotency_key:
            require_name("idempotency_key", idempotency_key)
        old = await self.get_any_job(job_id)
        if old.status not in RERUNNABLE:
            raise JobNotRetryable(f"a {old.status} job cannot be retried")
        stored_input = await self._reruns.rerun_input(job_id)
        rerun = None
        if stored_input is not None:
            stored_input = await self._sealer.open(old.user_id, job_id, INPUT, stored_input)
            spec = readmit(self._registry, old, stored_input)
            # the copy of the input is sealed for the re-run's own id
            new_id = new_job_id()
            sealed = await self._sealer.seal(old.user_id, new_id, INPUT, stored_input)
            rerun = await self._reruns.rerun(
                job_id,
                spec,
                reason,
                key=idempotency_key or None,
                since=since,
                new_id=new_id,
                snapshot=sealed if self._sealer.enabled else None,
            )
        if rerun is None:
            raise JobNotRetryable("the job's snapshot is gone; it cannot be retried")
        new, created = rerun
        if created:
            self._outbox.wake()
            log.info("job %s retried as %s (%s)", job_id, new.id, reason)
            await self._rearm(job_id)
        return await self.get_any_job(new.id)

    async def _rearm(self, job_id: str) -> None:
        """The re-run of ``job_id`` counts again for the jobs that depended on it: those
        still waiting wait for it too (done with the re-run), and those its end ended by
        their policy, never run, are re-run in turn, waiting for the newest run of each of
        their dependencies (and re-arm their own dependents)."""
        for dependent in await self._dependencies.ended_by(job_id):
            try:
                await self.retry_job(
                    dependent, f"dependency {job_id} retried"[:TIMELINE_REASON_CHARS]
                )
            except (JobNotRetryable, LiveRetryExists, LiveChildExists) as refused:
                log.info(
                    "job %s, ended by dependency %s, not re-run: %s", dependent, job_id, refused
                )

    async def dead_letters(
        self, requested_size: int, token: str
    ) -> tuple[list[Job], list[DeadEvent], str]:
        """Failed jobs no retry was made from, and dead outbox events, newest first, a
        page of each at a time."""
        size = page_size(requested_size)
        scope = {"listing": "dead_letters"}
        start = self._tokens.read(token, scope, _DEAD_LETTERS)
        failed: list[Job] = []
        next_failed: Cursor | None = None
        if start["failed"] is not None:
            after = None if start["failed"] == "start" else start["failed"]
            rows = await self._listing.list_jobs(
                JobFilter(status=JobStatus.FAILED, retried=False), after, size + 1
            )
            failed = await self._sealer.opened_all(rows[:size])
            if len(rows) > size:
                next_failed = Cursor(failed[-1].created_at, failed[-1].id)
        events: list[DeadEvent] = []
        next_events: Cursor | None = None
        if start["events"] is not None:
            before = None if start["events"] == "start" else int(start["events"].id)
            found = await self._dead_letters.dead_events(before, size + 1)
            events = found[:size]
            if len(found) > size:
                next_events = Cursor(events[-1].created_at, str(events[-1].id))
        token = self._tokens.issue(scope, {"failed": next_failed, "events": next_events})
        return failed, events, token


def attribution(principal: str, reason: str = "") -> str:
    """What an operator's action writes on a job's timeline: who, and why when given;
    cut to the column's size (the log keeps both whole)."""
    text = f"admin {principal}: {reason}" if reason else f"admin {principal}"
    return text[:TIMELINE_REASON_CHARS]


def scope_of(where: JobFilter) -> dict[str, Any]:
    """The filters a page token is bound to."""

    def stamp(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "user_id": where.user_id,
        "job_type": where.job_type,
        "status": where.status,
        "queue": where.queue,
        "created_after": stamp(where.created_after),
        "created_before": stamp(where.created_before),
        # absent when unset: tokens issued before these filters existed stay valid
        **({"target_type": where.target_type} if where.target_type else {}),
        **({"target_id": where.target_id} if where.target_id else {}),
        **({"id_suffix": where.id_suffix} if where.id_suffix else {}),
        **({"retried": where.retried} if where.retried is not None else {}),
    }
