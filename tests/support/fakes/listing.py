"""A fake of the read side (``JobListingStore``) as WatchJob's poll reads it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from job_service.domain.jobs import Job
from job_service.usecases.watch import fingerprint


class FakeJobListingStore:
    """``JobListingStore.fingerprints`` of the ``jobs`` stored (by id); records the ids of
    each poll (``asked``)."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.asked: list[list[str]] = []

    async def fingerprints(self, job_ids: Sequence[str]) -> dict[str, Any]:
        self.asked.append(list(job_ids))
        return {j: fingerprint(self.jobs[j]) for j in job_ids if j in self.jobs}
