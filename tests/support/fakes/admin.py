"""A fake of the admin use case (``usecases.admin.Admin``) as RetryJobs calls it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from job_service.domain.jobs import Job
from job_service.domain.selection import JobFilter
from tests.support.fakes.jobs import job


class FakeAdmin:
    """``Admin.check_filter`` accepts every filter; ``Admin.retry_job`` raises the error
    ``refusing`` names for a job, and otherwise answers a new job ``new-<last character
    of the id>``. Records each retry made (``retried``: job, reason) and its ``since``."""

    def __init__(self, refusing: Mapping[str, Exception] | None = None) -> None:
        self.refusing = dict(refusing or {})
        self.retried: list[tuple[str, str]] = []
        self.since: list[datetime | None] = []

    def check_filter(self, where: JobFilter) -> None:
        pass

    async def retry_job(
        self,
        job_id: str,
        reason: str = "retry",
        *,
        idempotency_key: str = "",
        since: datetime | None = None,
    ) -> Job:
        if job_id in self.refusing:
            raise self.refusing[job_id]
        self.retried.append((job_id, reason))
        self.since.append(since)
        return job(f"new-{job_id[-1]}", trigger="retry", retried_from_job_id=job_id)
