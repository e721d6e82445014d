"""What the results use case (commit a result with its projection) needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.lifecycle import JobStatus
from job_service.domain.models import NewChild, Submission
from shared.errors import LeaseLost


class ResultStore(Protocol):
    async def job_types(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The stored type of each job that exists (children are checked against it)."""
        ...

    async def submit_results(
        self, results: Sequence[Submission], children: Sequence[NewChild] = ()
    ) -> list[JobStatus | LeaseLost]:
        """Each result committed once with its artifacts, children and usage rows. The
        outbox rows of the committed results go to the dispatcher with the commit
        (``Handoff``); a refused result's answer may have written others (a wake-up's)."""
        ...
