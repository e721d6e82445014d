"""What the results use case (commit a result with its projection) needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from job_service.domain.attempts import Submission
from job_service.domain.jobs import NewChild
from job_service.domain.outbox import OutboxMessage


@dataclass(frozen=True)
class Committed:
    """What one submit wrote: the type of each job whose result it committed (by job id;
    the others were refused, nothing written), and the outbox rows it wrote claimed for
    this replica's dispatcher, to hand over now that they are committed."""

    job_types: dict[str, str]
    handed: list[OutboxMessage]


class ResultStore(Protocol):
    async def job_types(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The stored type of each job that exists (children are checked against it)."""
        ...

    async def submit_results(
        self, results: Sequence[Submission], children: Sequence[NewChild] = ()
    ) -> Committed:
        """Each result whose lease is current committed once (distinct jobs), with its
        artifacts, ``children`` and usage rows, in one statement."""
        ...
