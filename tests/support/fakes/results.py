"""A fake ``ResultStore``: results committed, or refused, by job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from job_service.domain.attempts import Submission
from job_service.domain.jobs import NewChild
from job_service.domain.outbox import OutboxMessage
from job_service.ports.results import Committed


class FakeResultStore:
    """``ResultStore`` over jobs of known ``types``: a submit commits the results of the
    jobs in ``committing`` (the others are refused, as a lease no longer current is) and
    hands over ``handed``. Records each submit (results, children)."""

    def __init__(
        self,
        types: Mapping[str, str],
        committing: set[str],
        handed: Sequence[OutboxMessage] = (),
    ) -> None:
        self.types = dict(types)
        self.committing = committing
        self.handed = list(handed)
        self.submitted: list[tuple[list[Submission], list[NewChild]]] = []

    async def job_types(self, job_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        # every job of a fake store is of its type's version "1"
        return {j: (self.types[j], "1") for j in job_ids if j in self.types}

    async def owners(self, job_ids: Sequence[str]) -> dict[str, str]:
        # every job of a fake store is user-1's
        return {j: "user-1" for j in job_ids if j in self.types}

    async def submit_results(
        self, results: Sequence[Submission], children: Sequence[NewChild] = ()
    ) -> Committed:
        self.submitted.append((list(results), list(children)))
        done = {r.job_id: self.types[r.job_id] for r in results if r.job_id in self.committing}
        return Committed(done, list(self.handed))
