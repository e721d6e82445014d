"""``FakeAdminClient``: ``AsyncAdminClient``'s methods over a ``JobServiceState``."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from durable_jobs_client._pb.jobs.v1 import admin_service_pb2 as apb
from durable_jobs_client._pb.jobs.v1 import job_pb2
from durable_jobs_client.errors import (
    InvalidInput,
    JobsError,
    Unauthenticated,
    UserHasRunningJobs,
)
from durable_jobs_client.statuses import TERMINAL
from durable_jobs_client.testing._rules import (
    CANCELS,
    RERUNNABLE,
    cancel,
    counts,
    matches,
    rerun,
    selector,
    status_of,
)
from durable_jobs_client.testing._service import (
    JobServiceState,
    copy_of,
    id_ending,
    newest_first,
    now_stamp,
    oldest_first,
    page,
    refusal,
)

BULK_LIMIT, MAX_BULK_LIMIT = 100, 1000  # jobs per CancelJobs / RetryJobs call


class FakeAdminClient:
    """AdminService in memory: every user's jobs, dead letters, queues, workers, console
    sessions of ``JobServiceState``."""

    def __init__(self, service: JobServiceState) -> None:
        self.service = service

    async def list_jobs(
        self,
        *,
        job_type: str = "",
        status: job_pb2.JobStatus | None = None,
        queue: str = "",
        user_id: str = "",
        target_type: str = "",
        target_id: str = "",
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        id_suffix: str = "",
    ) -> apb.AdminListJobsResponse:
        """One page of every user's jobs, newest first, filtered."""
        answer = await self.service.called("admin.list_jobs", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        where = dict(
            job_type=job_type,
            status=status,
            queue=queue,
            user_id=user_id,
            target_type=target_type,
            target_id=target_id,
            created_after=created_after,
            created_before=created_before,
        )
        ending = id_ending(id_suffix) if id_suffix else None
        found = [
            j
            for j in newest_first(self.service.jobs.values())
            if matches(j, **where) and (ending is None or ending(j))
        ]
        jobs, token = page(found, page_size, page_token)
        shown = [copy_of(j, internal=True) for j in jobs]
        return apb.AdminListJobsResponse(jobs=shown, next_page_token=token)

    async def get_job(self, job_id: str) -> job_pb2.Job:
        """Any user's job, with what only operators see."""
        answer = await self.service.called("admin.get_job", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        return copy_of(self.service.job(job_id), internal=True)

    async def retry_job(self, job_id: str, *, idempotency_key: str = "") -> job_pb2.Job:
        answer = await self.service.called("admin.retry_job", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        if not idempotency_key:
            return copy_of(rerun(self.service, job_id), internal=True)
        key = ("retry", job_id, idempotency_key)
        new, _ = self.service.once(key, lambda: rerun(self.service, job_id))
        return copy_of(new, internal=True)

    async def cancel_jobs(
        self,
        selection: apb.JobSelection,
        *,
        dry_run: bool = False,
        limit: int = 0,
        page_token: str = "",
        reason: str = "",
    ) -> apb.CancelJobsResponse:
        """One call of a bulk cancel, oldest first; a dry run counts and changes nothing."""
        answer = await self.service.called("admin.cancel_jobs", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        chosen = oldest_first(filter(selector(selection), self.service.jobs.values()))
        if dry_run:
            jobs, _ = self._bulk_page(chosen, limit, "")
            would = [j.id for j in jobs if j.status in CANCELS]
            return apb.CancelJobsResponse(
                cancelled=len(would),
                skipped=len(jobs) - len(would),
                matched=sum(1 for j in chosen if j.status in CANCELS),
                job_ids=would,
            )
        jobs, token = self._bulk_page(chosen, limit, page_token)
        done = [j.id for j in jobs if cancel(self.service, j)]
        return apb.CancelJobsResponse(
            cancelled=len(done), skipped=len(jobs) - len(done), job_ids=done, next_page_token=token
        )

    async def retry_jobs(
        self,
        selection: apb.JobSelection,
        *,
        dry_run: bool = False,
        limit: int = 0,
        page_token: str = "",
        reason: str = "",
    ) -> apb.RetryJobsResponse:
        """One call of a bulk retry, oldest first: each job's refusal answers for it alone
        (a filter names only jobs no retry was made from)."""
        answer = await self.service.called("admin.retry_jobs", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        selects = selector(selection)
        chosen = oldest_first(
            j
            for j in self.service.jobs.values()
            if selects(j) and (selection.job_ids or not j.retried_as_job_ids)
        )
        if dry_run:
            jobs, _ = self._bulk_page(chosen, limit, "")
            outcomes = [apb.RetryJobOutcome(job_id=j.id) for j in jobs if j.status in RERUNNABLE]
            matched = sum(1 for j in chosen if j.status in RERUNNABLE)
            return apb.RetryJobsResponse(retried=len(outcomes), matched=matched, outcomes=outcomes)
        jobs, token = self._bulk_page(chosen, limit, page_token)
        outcomes = [self._retried(j.id) for j in jobs]
        retried = sum(1 for o in outcomes if o.new_job_id)
        return apb.RetryJobsResponse(retried=retried, outcomes=outcomes, next_page_token=token)

    async def list_dead_letters(
        self, *, page_size: int = 0, page_token: str = ""
    ) -> apb.ListDeadLettersResponse:
        """Failed jobs, newest first, and the dead outbox events (one token for both)."""
        answer = await self.service.called("admin.list_dead_letters", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        jobs_token, _, events_from = page_token.partition(";")
        failed = [j for j in self.service.jobs.values() if j.status == job_pb2.JOB_STATUS_FAILED]
        jobs, next_jobs = page(newest_first(failed), page_size, jobs_token)
        start = int(events_from or 0)
        end = start + (page_size or 50)
        events = self.service.dead_events[start:end]
        more = end < len(self.service.dead_events)
        token = f"{next_jobs};{end if more else ''}" if next_jobs or more else ""
        shown = [copy_of(j, internal=True) for j in jobs]
        return apb.ListDeadLettersResponse(
            failed_jobs=shown, dead_events=events, next_page_token=token
        )

    async def redrive_dead_letters(self, event_ids: Sequence[int] = ()) -> int:
        """Takes the named dead events (none named: every one) off the list."""
        answer = await self.service.called("admin.redrive_dead_letters", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        dead = self.service.dead_events
        kept = [e for e in dead if event_ids and e.id not in event_ids]
        self.service.dead_events = kept
        return len(dead) - len(kept)

    async def list_job_definitions(self) -> list[apb.JobDefinitionInfo]:
        answer = await self.service.called("admin.list_job_definitions", locals())
        return list(self.service.definitions) if answer is None else answer

    async def list_queues(self) -> list[apb.QueueInfo]:
        answer = await self.service.called("admin.list_queues", locals())
        return list(self.service.queues) if answer is None else answer

    async def pause_queue(self, queue: str) -> apb.QueueInfo:
        answer = await self.service.called("admin.pause_queue", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        info = self._queue(queue)
        if not info.paused:
            info.paused, info.paused_by = True, self.service.principal
            now_stamp(info.paused_at)
        return info

    async def resume_queue(self, queue: str) -> apb.QueueInfo:
        answer = await self.service.called("admin.resume_queue", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        info = self._queue(queue)
        info.paused, info.paused_by = False, ""
        info.ClearField("paused_at")
        return info

    async def list_workers(self) -> list[apb.Worker]:
        answer = await self.service.called("admin.list_workers", locals())
        return list(self.service.workers) if answer is None else answer

    async def count_jobs(
        self, since: datetime, until: datetime | None = None
    ) -> apb.CountJobsResponse:
        """Exact counts of the service's jobs over [since, until) (None: now)."""
        answer = await self.service.called("admin.count_jobs", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        return counts(self.service.jobs.values(), since, until or datetime.now(UTC))

    async def open_console_session(
        self, *, idle_timeout: timedelta | None = None, max_age: timedelta | None = None
    ) -> apb.OpenConsoleSessionResponse:
        """A session of ``service.principal``; its id a fresh secret."""
        answer = await self.service.called("admin.open_console_session", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        session_id = secrets.token_urlsafe(32)
        self.service.console_sessions[session_id] = self.service.principal
        opened = apb.OpenConsoleSessionResponse(
            session_id=session_id, principal=self.service.principal
        )
        opened.expires_at.FromDatetime(datetime.now(UTC) + (max_age or timedelta(hours=8)))
        return opened

    async def check_console_session(self, session_id: str) -> apb.CheckConsoleSessionResponse:
        """The session's principal; Unauthenticated for one not in ``console_sessions``."""
        answer = await self.service.called("admin.check_console_session", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        principal = self.service.console_sessions.get(session_id)
        if principal is None:
            raise refusal(Unauthenticated, "console session ended")
        return apb.CheckConsoleSessionResponse(principal=principal)

    async def close_console_session(self, session_id: str) -> None:
        await self.service.called("admin.close_console_session", locals())
        self.service.console_sessions.pop(session_id, None)

    async def revoke_console_sessions(self, principal: str) -> int:
        answer = await self.service.called("admin.revoke_console_sessions", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        sessions = self.service.console_sessions
        ended = [s for s, owner in sessions.items() if owner == principal]
        for session_id in ended:
            del sessions[session_id]
        return len(ended)

    async def erase_user_data(
        self, user_id: str, *, dry_run: bool = False, cancel_running: bool = False
    ) -> apb.EraseUserDataResponse:
        """Counts (dry run) or deletes the user's jobs and stored keys; refused while any
        of their jobs is unfinished (after cancelling them, with ``cancel_running``)."""
        answer = await self.service.called("admin.erase_user_data", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        if not user_id:
            raise refusal(InvalidInput, "user_id is missing or malformed")
        mine = [j for j in self.service.jobs.values() if j.user_id == user_id]
        keys = [c for c in self.service.credentials if c.user_id == user_id]
        unfinished = [j for j in mine if j.status not in TERMINAL]
        counted = apb.EraseUserDataResponse(
            jobs=len(mine), credentials=len(keys), unfinished=len(unfinished)
        )
        if dry_run:
            return counted
        cancelled = sum(cancel(self.service, j) for j in unfinished) if cancel_running else 0
        if any(j.status not in TERMINAL for j in mine):
            raise refusal(UserHasRunningJobs, "the user has unfinished jobs; nothing was erased")
        for job in mine:
            del self.service.jobs[job.id]
        self.service.credentials[:] = [c for c in self.service.credentials if c not in keys]
        self.service.changed()
        counted.unfinished, counted.cancelled = 0, cancelled
        return counted

    async def list_rate_limits(self) -> list[apb.RateLimitInfo]:
        answer = await self.service.called("admin.list_rate_limits", locals())
        return list(self.service.rate_limits) if answer is None else answer

    def _queue(self, name: str) -> apb.QueueInfo:
        for info in self.service.queues:
            if info.name == name:
                return info
        self.service.queues.append(apb.QueueInfo(name=name))
        return self.service.queues[-1]

    def _bulk_page(
        self, chosen: list[job_pb2.Job], limit: int, page_token: str
    ) -> tuple[list[job_pb2.Job], str]:
        if limit > MAX_BULK_LIMIT:
            raise refusal(InvalidInput, f"limit is at most {MAX_BULK_LIMIT}")
        return page(
            chosen, limit, page_token, newest=False, default=BULK_LIMIT, most=MAX_BULK_LIMIT
        )

    def _retried(self, job_id: str) -> apb.RetryJobOutcome:
        try:
            return apb.RetryJobOutcome(job_id=job_id, new_job_id=rerun(self.service, job_id).id)
        except JobsError as refused:
            return apb.RetryJobOutcome(job_id=job_id, status=status_of(refused))
