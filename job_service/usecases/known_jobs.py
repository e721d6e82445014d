"""What this replica learnt of the jobs it granted that never changes: type, definition
version and owner (issue 42: a CPU diet).

A submit checks each result against its job's declared output schema and seals it under
its owner's key, so it needs the job's type, version and user; the claim that granted the
attempt read them already. Kept here from the grant until the job's result comes back,
they spare the submit a statement; a result of a job this replica did not grant (another
replica did, or this one restarted) is looked up as before. Bounded: the oldest entries go
first (a job whose result never comes back, e.g. its worker died).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from job_service.domain.grants import LockGrant

# Far above the jobs in flight on one replica; each entry is a few hundred bytes.
MAX_KNOWN = 50_000


class KnownJob(NamedTuple):
    job_type: str
    version: str
    user_id: str


class KnownJobs:
    def __init__(self, limit: int = MAX_KNOWN) -> None:
        self._limit = limit
        self._jobs: dict[str, KnownJob] = {}

    def granted(self, grants: Iterable[LockGrant]) -> None:
        for grant in grants:
            if grant.definition_version:
                self._jobs[grant.job_id] = KnownJob(
                    grant.job_type, grant.definition_version, grant.user_id
                )
        while len(self._jobs) > self._limit:
            del self._jobs[next(iter(self._jobs))]

    def take(self, job_ids: Sequence[str]) -> dict[str, KnownJob]:
        """The known ones of these jobs, forgotten here (their results are in)."""
        return {j: known for j in job_ids if (known := self._jobs.pop(j, None)) is not None}
