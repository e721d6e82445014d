"""The job types workers declare (ExecutorService.DeclareJobType): checked, stored once per
(job_type, version), and held in memory by every replica (``JobTypes``), which learns of
declarations made at another replica by reading what is new every second, and at once when
a request names a type it does not know yet."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from job_service.domain import spec_checks
from job_service.domain.checks import require_name
from job_service.domain.declared_types import JobTypes
from job_service.domain.job_types import JobType
from job_service.ports.job_types import Declaration, JobTypeStore
from shared.errors import FieldViolation, InvalidInput, JobTypeSpecConflict
from shared.pb.jobs.v1.job_type_pb2 import JobTypeSpec

log = logging.getLogger(__name__)

# How far back a refresh reads again: a declaration another replica made is committed a
# moment after its timestamp was taken, so "after the last one seen" alone could skip it.
REREAD_S = 10.0


class DeclaredJobTypes:
    def __init__(self, store: JobTypeStore, types: JobTypes) -> None:
        self._store = store
        self.types = types
        self._since: datetime | None = None
        self._refreshing = asyncio.Lock()
        self._reads_started = 0

    async def declare(self, worker_id: str, spec: JobTypeSpec) -> Declaration:
        """Stores ``spec`` as ``worker_id`` declared it: InvalidInput naming each bad field
        of a malformed spec, JobTypeSpecConflict naming each field that differs from the
        spec stored for its (job_type, version)."""
        require_name("worker_id", worker_id)
        problems = spec_checks.problems(spec)
        if problems:
            raise InvalidInput("the job type spec is not valid", problems)
        declaration, new = await self._store.declare(spec, worker_id)
        if not new:
            differing = spec_checks.differences(declaration.spec, spec)
            if differing:
                raise conflict(spec, declaration, differing)
            await self._store.touch(spec.job_type, spec.version, worker_id)
        else:
            log.debug("job type %s@%s declared by %s", spec.job_type, spec.version, worker_id)
        self._add(declaration)
        return declaration

    async def load(self) -> int:
        """Reads what was declared since the last read (everything the first time): how
        many declarations were new to this replica. Callers that ask while a read is under
        way share the next one: many requests naming unknown types cost one read at a time,
        and each still sees every declaration committed before it asked."""
        asked = self._reads_started
        async with self._refreshing:
            if self._reads_started > asked:
                return 0  # a read that began after this call asked has finished
            self._reads_started += 1
            since = None if self._since is None else self._since - timedelta(seconds=REREAD_S)
            declarations = await self._store.declared_since(since)
            before = self.types.generation
            for declaration in declarations:
                self._add(declaration)
            return self.types.generation - before

    async def declarations(self) -> list[Declaration]:
        """Every stored declaration, with where it came from (read from the database)."""
        return await self._store.declared_since(None)

    def _add(self, declaration: Declaration) -> None:
        at = declaration.first_declared_at
        if self._since is None or at > self._since:
            self._since = at
        spec = declaration.spec
        if self.types.version(spec.job_type, spec.version) is None:
            self.types.add(JobType.from_spec(spec), at.timestamp())


def conflict(spec: JobTypeSpec, stored: Declaration, differing: list[str]) -> JobTypeSpecConflict:
    name = f"{spec.job_type}@{spec.version}"
    return JobTypeSpecConflict(
        f"job type {name} was declared differently by {stored.first_declared_by}: "
        f"{', '.join(differing)} differ; declare a new version to change it",
        [
            FieldViolation(f"spec.{field}", f"differs from the stored spec of {name}")
            for field in differing
        ],
    )
