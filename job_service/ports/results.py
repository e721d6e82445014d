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
    async def job_types(self, job_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The stored type and version of each job that exists (its output and children
        are checked against them)."""
        ...

    async def owners(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The user of each job that exists (its result is sealed under their key)."""
        ...

    async def submit_results(
        self, results: Sequence[Submission], children: Sequence[NewChild] = ()
    ) -> Committed:
        """Each result whose lease is current committed once (distinct jobs), with its
        artifacts, ``children`` and usage rows, in one statement."""
        ...
