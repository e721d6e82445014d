"""What the read side (listings, WatchJob, the live workers) needs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from job_service.domain.counts import JobCounts
from job_service.domain.jobs import Job
from job_service.domain.selection import Cursor, JobFilter
from job_service.domain.workers import LiveWorker


class JobListingStore(Protocol):
    async def list_jobs(self, where: JobFilter, after: Cursor | None, limit: int) -> list[Job]: ...

    async def fingerprints(self, job_ids: Sequence[str]) -> dict[str, Any]: ...

    async def live_workers(self) -> list[LiveWorker]: ...

    async def count_jobs(
        self, since: datetime, until: datetime | None, job_types: Sequence[str]
    ) -> JobCounts: ...
