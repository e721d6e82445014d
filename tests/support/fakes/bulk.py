"""A fake ``BulkStore``: the jobs a bulk action walks, in creation order."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from job_service.domain.lifecycle import TRANSITIONS, JobStatus, Step
from job_service.domain.selection import Actionable, Candidate, Cursor, JobSelection


class FakeBulkStore:
    """``BulkStore`` over ``jobs`` (in creation order). Every job matches the selection's
    filter (its fields and ``until`` are not read): named jobs are selected whether or not
    the action would change them, a filter selects only those it would. A cancelled page
    moves its jobs as CancelJob does and reports ``descendants`` as moved with it.
    Records the name of each call (``calls``) and each page's ``until``."""

    def __init__(
        self,
        jobs: Sequence[Candidate],
        now: datetime,
        descendants: Sequence[tuple[str, JobStatus]] = (),
    ) -> None:
        self.jobs = list(jobs)
        self.clock = now
        self.descendants = list(descendants)
        self.calls: list[str] = []
        self.untils: list[datetime | None] = []

    def _selected(self, selection: JobSelection, actionable: Actionable) -> list[Candidate]:
        found = []
        for job in self.jobs:
            changes = job.status in actionable.statuses
            if selection.job_ids and job.id in selection.job_ids:
                found.append(Candidate(job.id, job.created_at, job.job_type, job.status, changes))
            elif not selection.job_ids and changes:
                found.append(Candidate(job.id, job.created_at, job.job_type, job.status, True))
        return found

    def _page(
        self, selection: JobSelection, actionable: Actionable, after: Cursor | None, limit: int
    ) -> tuple[list[Candidate], bool]:
        rest = [
            c
            for c in self._selected(selection, actionable)
            if after is None or (c.created_at, c.id) > (after.created_at, after.id)
        ]
        return rest[:limit], len(rest) > limit

    async def count(self, selection: JobSelection, actionable: Actionable) -> int:
        self.calls.append("count")
        return sum(c.actionable for c in self._selected(selection, actionable))

    async def page(
        self, selection: JobSelection, actionable: Actionable, after: Cursor | None, limit: int
    ) -> tuple[list[Candidate], bool]:
        self.calls.append("page")
        self.untils.append(selection.until)
        return self._page(selection, actionable, after, limit)

    async def now(self) -> datetime:
        return self.clock

    async def missing(self, job_ids: Sequence[str]) -> list[str]:
        self.calls.append("missing")
        return sorted(set(job_ids) - {j.id for j in self.jobs})

    async def cancel_page(
        self,
        selection: JobSelection,
        actionable: Actionable,
        after: Cursor | None,
        limit: int,
        reason: str,
    ) -> tuple[list[tuple[Candidate, JobStatus | None]], list[tuple[str, JobStatus]], bool]:
        self.calls.append(f"cancel_page {reason}")
        page, more = self._page(selection, actionable, after, limit)
        moved = [(c, TRANSITIONS.get((c.status, Step.CANCEL))) for c in page]
        return moved, list(self.descendants), more
