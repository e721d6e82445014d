"""Bulk admin actions: CancelJobs and RetryJobs over a selection of jobs (a filter, or up
to 1000 ids), a bounded page per call, oldest first, with a page token that continues
after the last job of the page and is bound to the action and the selection.

A walk is pinned to its first call: its token carries that call's time, a filter selects
only jobs created before it (never a job the walk made), and a RetryJobs walk retries each
original job at most once (a job whose original was retried since the walk began is
answered LIVE_RETRY_EXISTS), on top of the one live retry per original that every retry
is held to. A RetryJobs filter matches only jobs no retry was made from: of a lineage that
failed twice, the newest failure, so that a dry run counts each piece of work once.

Each action keeps its single-job semantics: a cancel moves each job as CancelJob does (a
running job is asked to stop at once over NATS, unfinished descendants are cancelled with
it) but one page in one statement; a retry is ``Admin.retry_job`` per job, a refusal
answering only that job. Every action is logged with the calling principal, and the
principal and the operator's reason are written on each changed job's timeline.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from job_service import metrics
from job_service.domain.checks import is_uuid
from job_service.domain.declared_types import JobTypes
from job_service.domain.lifecycle import RERUNNABLE, JobStatus, Step, sources
from job_service.domain.paging import PageTokens
from job_service.domain.selection import Actionable, Candidate, Cursor, JobFilter, JobSelection
from job_service.ports.bulk import BulkStore
from job_service.ports.jobs import CancelNotifier
from job_service.ports.outbox import Waker
from job_service.usecases.admin import Admin, attribution, scope_of
from job_service.usecases.stop_notices import tell_workers_to_stop
from shared.errors import FieldViolation, InvalidInput, JobNotFound, JobNotRetryable, JobsError

log = logging.getLogger(__name__)

MAX_SELECTED_IDS = 1000
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
# job_events.reason holds 100 characters: "admin <principal>: <reason>" fits with a principal
# of up to 28; a longer one is cut there (the log line keeps both whole).
MAX_REASON_CHARS = 64
_WALK = ("jobs", "until")  # where the next page starts; when the walk began


@dataclass(frozen=True)
class BulkRequest:
    """One CancelJobs or RetryJobs call, as the servicer read it."""

    selection: JobSelection
    principal: str
    dry_run: bool = False
    limit: int = 0
    page_token: str = ""
    reason: str = ""


@dataclass(frozen=True)
class CancelPage:
    cancelled: list[str]  # ids, oldest first (with dry_run: would be)
    skipped: int  # page jobs left as they were
    matched: int  # with dry_run: every job the selection would cancel now
    next_page_token: str


@dataclass(frozen=True)
class RetryOutcome:
    job_id: str
    new_job_id: str = ""
    error: JobsError | None = None


@dataclass(frozen=True)
class RetryPage:
    outcomes: list[RetryOutcome]
    matched: int
    next_page_token: str

    @property
    def retried(self) -> int:
        return sum(1 for o in self.outcomes if o.error is None)


class BulkActions:
    def __init__(
        self,
        registry: JobTypes,
        admin: Admin,
        store: BulkStore,
        tokens: PageTokens,
        notifier: CancelNotifier,
        outbox: Waker,
    ) -> None:
        self._registry = registry
        self._admin = admin
        self._store = store
        self._tokens = tokens
        self._notifier = notifier
        self._outbox = outbox

    async def cancel_jobs(self, request: BulkRequest) -> CancelPage:
        """Cancels the next page of the selection (or, with dry_run, counts)."""
        limit, scope, after, selection = await self._check(request, "cancel")
        actionable = Actionable(
            sources(Step.CANCEL),
            frozenset(d.job_type for d in self._registry if not d.cancellable),
        )
        if request.dry_run:
            page, _ = await self._store.page(selection, actionable, after, limit)
            matched = await self._store.count(selection, actionable)
            would = [c.id for c in page if c.actionable]
            return CancelPage(would, len(page) - len(would), matched, "")
        reason = attribution(request.principal, request.reason)
        acted, descendants, more = await self._store.cancel_page(
            selection, actionable, after, limit, reason
        )
        cancelled = [(job, now) for job, now in acted if now is not None]
        for job, now in cancelled:
            metrics.job_cancelled(job.job_type, job.status, now)
        stopping = [job.id for job, now in cancelled if now is JobStatus.CANCEL_REQUESTED]
        stopping += [j for j, now in descendants if now is JobStatus.CANCEL_REQUESTED]
        await tell_workers_to_stop(self._notifier, stopping)
        if cancelled or descendants:
            self._outbox.wake()
        log.info(
            "CancelJobs by %s (reason %r): %d cancelled, %d skipped, %d descendants cancelled",
            request.principal,
            request.reason,
            len(cancelled),
            len(acted) - len(cancelled),
            len(descendants),
        )
        return CancelPage(
            [c.id for c, _ in cancelled],
            len(acted) - len(cancelled),
            0,
            self._next_token(scope, selection, [c for c, _ in acted], more),
        )

    async def retry_jobs(self, request: BulkRequest) -> RetryPage:
        """Retries the next page of the selection (or, with dry_run, counts): one new job
        per failed or cancelled job, each refusal answered for its job alone."""
        limit, scope, after, selection = await self._check(request, "retry")
        if not selection.job_ids:  # a filter matches the newest failure of each lineage
            selection = replace(selection, where=replace(selection.where, retried=False))
        actionable = Actionable(RERUNNABLE)
        page, more = await self._store.page(selection, actionable, after, limit)
        # ids that name no job are answered on the first page (later pages hold only jobs)
        missing = []
        if request.selection.job_ids and not request.page_token:
            missing = await self._store.missing(request.selection.job_ids)
        outcomes = [RetryOutcome(job_id, error=JobNotFound("no such job")) for job_id in missing]
        if request.dry_run:
            outcomes += [_predicted(c) for c in page]
            matched = await self._store.count(selection, actionable)
            return RetryPage(outcomes, matched, "")
        reason = attribution(request.principal, request.reason)
        for candidate in page:
            try:
                new = await self._admin.retry_job(candidate.id, reason, since=selection.until)
            except JobsError as error:  # this job only: the others go on
                outcomes.append(RetryOutcome(candidate.id, error=error))
            else:
                outcomes.append(RetryOutcome(candidate.id, new_job_id=new.id))
        result = RetryPage(outcomes, 0, self._next_token(scope, selection, page, more))
        log.info(
            "RetryJobs by %s (reason %r): %d retried, %d refused",
            request.principal,
            request.reason,
            result.retried,
            len(outcomes) - result.retried,
        )
        return result

    async def _check(
        self, request: BulkRequest, action: str
    ) -> tuple[int, dict[str, Any], Cursor | None, JobSelection]:
        """The request checked: its limit, its page token's scope, where it starts and
        its selection pinned to the walk's first call (``until``: now on a first call
        that changes jobs, else the token's; a dry run is not pinned)."""
        selection = request.selection
        has_filter = selection.where != JobFilter()
        if not selection.job_ids and not has_filter:
            raise InvalidInput(
                "the selection is empty; it would name every job",
                [FieldViolation("selection", "job_ids, or at least one filter")],
            )
        if selection.job_ids and has_filter:
            raise InvalidInput(
                "give job_ids or filters, not both",
                [FieldViolation("selection.job_ids", "not with filters")],
            )
        if len(selection.job_ids) > MAX_SELECTED_IDS:
            raise InvalidInput(
                f"at most {MAX_SELECTED_IDS} job_ids per call",
                [FieldViolation("selection.job_ids", f"1..{MAX_SELECTED_IDS} ids")],
            )
        if not all(is_uuid(i) for i in selection.job_ids):
            raise InvalidInput(
                "a job id is not valid",
                [FieldViolation("selection.job_ids", "each one a UUID")],
            )
        if has_filter:
            try:
                self._admin.check_filter(selection.where)
            except InvalidInput as error:  # name the fields as the request spells them
                raise type(error)(
                    error.message,
                    [replace(v, field=f"selection.{v.field}") for v in error.violations],
                ) from None
        if not 0 <= request.limit <= MAX_LIMIT:
            raise InvalidInput(
                f"limit must be within 0..{MAX_LIMIT}",
                [FieldViolation("limit", f"0 (default {DEFAULT_LIMIT}) .. {MAX_LIMIT}")],
            )
        if len(request.reason) > MAX_REASON_CHARS or not request.reason.isprintable():
            raise InvalidInput(
                "reason is too long or has control characters",
                [FieldViolation("reason", f"0..{MAX_REASON_CHARS} printable characters")],
            )
        scope = {"bulk": action, **_selection_scope(selection)}
        start = self._tokens.read(request.page_token, scope, _WALK)
        limit = request.limit or DEFAULT_LIMIT
        if start["jobs"] == "start":
            until = None if request.dry_run else await self._store.now()
            return limit, scope, None, replace(selection, until=until)
        began: Cursor | None = start["until"]
        until = None if began is None else began.created_at
        return limit, scope, start["jobs"], replace(selection, until=until)

    def _next_token(
        self,
        scope: dict[str, Any],
        selection: JobSelection,
        page: Sequence[Candidate],
        more: bool,
    ) -> str:
        last = Cursor(page[-1].created_at, page[-1].id) if more and page else None
        began = None if last is None or selection.until is None else Cursor(selection.until, "")
        return self._tokens.issue(scope, {"jobs": last, "until": began})


def _selection_scope(selection: JobSelection) -> dict[str, Any]:
    if selection.job_ids:
        return {"job_ids": sorted(selection.job_ids)}
    return scope_of(selection.where)


def _predicted(candidate: Candidate) -> RetryOutcome:
    """A dry run's answer for one job: judged by its status alone."""
    if candidate.actionable:
        return RetryOutcome(candidate.id)
    error = JobNotRetryable(f"a {candidate.status} job cannot be retried")
    return RetryOutcome(candidate.id, error=error)
