"""What the bulk admin actions (CancelJobs, RetryJobs) need from storage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from job_service.domain.lifecycle import JobStatus
from job_service.domain.selection import Actionable, Candidate, Cursor, JobSelection


class BulkStore(Protocol):
    async def count(self, selection: JobSelection, actionable: Actionable) -> int:
        """How many jobs of the selection the action would change now."""
        ...

    async def page(
        self, selection: JobSelection, actionable: Actionable, after: Cursor | None, limit: int
    ) -> tuple[list[Candidate], bool]:
        """Up to ``limit`` jobs of the selection after ``after``, oldest first; more?"""
        ...

    async def now(self) -> datetime:
        """The clock jobs' creation times are read from (a filter walk's ``until``)."""
        ...

    async def missing(self, job_ids: Sequence[str]) -> list[str]:
        """The ids of ``job_ids`` that name no job."""
        ...

    async def cancel_page(
        self,
        selection: JobSelection,
        actionable: Actionable,
        after: Cursor | None,
        limit: int,
        reason: str,
    ) -> tuple[list[tuple[Candidate, JobStatus | None]], list[tuple[str, JobStatus]], bool]:
        """Cancels the next page and its jobs' unfinished descendants in one transaction:
        each page job with its new status (None: unchanged), each descendant moved, more?"""
        ...
