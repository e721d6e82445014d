"""What the declared job types use case needs: the specs every replica shares."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shared.pb.jobs.v1.job_type_pb2 import JobTypeSpec


@dataclass(frozen=True)
class Declaration:
    """A stored spec and where it came from."""

    spec: JobTypeSpec
    first_declared_by: str
    first_declared_at: datetime
    last_declared_by: str
    last_declared_at: datetime


class JobTypeStore(Protocol):
    async def declare(self, spec: JobTypeSpec, worker_id: str) -> tuple[Declaration, bool]:
        """Stores ``spec`` unless its (job_type, version) is stored already; the stored
        declaration, and whether it is this call's."""
        ...

    async def touch(self, job_type: str, version: str, worker_id: str) -> None:
        """Records that ``worker_id`` declared the stored spec again, now."""
        ...

    async def declared_since(self, since: datetime | None) -> list[Declaration]:
        """The declarations first made after ``since`` (all of them for None), oldest
        first."""
        ...
