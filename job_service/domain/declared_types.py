"""The job types declared to this deployment, as one replica holds them in memory.

Each (job_type, version) some worker declared, in the order they were first declared; the
newest version of a type is its *current* one, which new jobs are created with (a job stays
pinned to its version: a rolling upgrade runs old jobs on old workers). What the job
service derives from the whole set (its queues, slots, tier estimates) is recomputed when
the set changes (``generation``); a replica learns of declarations made at another one by
refreshing from the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from job_service.domain.job_types import JobType
from shared.errors import FieldViolation, UnknownJobType

T = TypeVar("T")


class JobTypes:
    """The declared job types: ``get`` the current version of a type, iterate over every
    type's current version."""

    def __init__(self, types: Iterable[JobType] = ()) -> None:
        self._versions: dict[tuple[str, str], tuple[JobType, float]] = {}
        self._current: dict[str, JobType] = {}
        self.generation = 0
        self._derived: dict[str, tuple[int, Any]] = {}
        for order, job_type in enumerate(types):
            self.add(job_type, float(order))

    def add(self, job_type: JobType, first_declared: float) -> None:
        """Takes a declared type, first declared at ``first_declared`` (a timestamp): of a
        type's versions, the one declared last is current, in whatever order they come."""
        key = (job_type.job_type, job_type.version)
        if key in self._versions:
            return
        self._versions[key] = (job_type, first_declared)
        current = self._current.get(job_type.job_type)
        if (
            current is None
            or self._versions[current.job_type, current.version][1] <= first_declared
        ):
            self._current[job_type.job_type] = job_type
        self.generation += 1

    def get(self, job_type: str) -> JobType:
        """The current version of ``job_type``; UnknownJobType if none was declared."""
        try:
            return self._current[job_type]
        except KeyError:
            raise unknown(job_type) from None

    def version(self, job_type: str, version: str) -> JobType | None:
        found = self._versions.get((job_type, version))
        return None if found is None else found[0]

    def knows(self, job_type: str) -> bool:
        return job_type in self._current

    def __iter__(self) -> Iterator[JobType]:
        return iter(list(self._current.values()))

    def every_version(self) -> list[JobType]:
        return [job_type for job_type, _ in self._versions.values()]

    def derived(self, name: str, compute: Callable[[JobTypes], T]) -> T:
        """``compute(self)``, remembered until the set of types changes."""
        cached = self._derived.get(name)
        if cached is not None and cached[0] == self.generation:
            return cached[1]  # type: ignore[no-any-return]
        value = compute(self)
        self._derived[name] = (self.generation, value)
        return value

    def queue_concurrency(self) -> dict[str, int]:
        """Worker slots per queue: the largest concurrency of the queue's job types."""
        slots: dict[str, int] = {}
        for t in self:
            slots[t.queue] = max(slots.get(t.queue, 0), t.concurrency)
        return slots


def unknown(job_type: str) -> UnknownJobType:
    return UnknownJobType(
        f"no worker has declared job type {job_type!r}",
        [FieldViolation("job_type", "no worker has declared this job type")],
    )
