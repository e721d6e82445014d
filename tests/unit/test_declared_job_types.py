"""The declared job types a replica holds (job_service.usecases.job_types): requests that
name types it does not know share the reads of the database, yet each sees every
declaration committed before it asked."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from job_service.domain.declared_types import JobTypes
from job_service.ports.job_types import Declaration
from job_service.usecases.job_types import DeclaredJobTypes
from jobtypes import synthetic
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1.job_type_pb2 import JobTypeSpec


class SlowStore:
    """declared_since waits until released; counts its reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.release = asyncio.Event()
        self.stored: list[Declaration] = []

    async def declare(self, spec: JobTypeSpec, worker_id: str) -> tuple[Declaration, bool]:
        raise NotImplementedError

    async def touch(self, job_type: str, version: str, worker_id: str) -> None:
        raise NotImplementedError

    async def declared_since(self, since: datetime | None) -> list[Declaration]:
        self.reads += 1
        await self.release.wait()
        return list(self.stored)


async def test_misses_asked_together_share_one_read_after_the_one_under_way() -> None:
    store = SlowStore()
    declared = DeclaredJobTypes(store, JobTypes())
    first = asyncio.create_task(declared.load())  # a read under way
    await asyncio.sleep(0)
    now = datetime.now(UTC)
    store.stored = [Declaration(spec_of(synthetic.DEFINITION), "w", now, "w", now)]
    # fifty requests naming an unknown type while it runs
    misses = [asyncio.create_task(declared.load()) for _ in range(50)]
    await asyncio.sleep(0)
    store.release.set()
    await asyncio.gather(first, *misses)

    assert store.reads == 2  # the one under way (it began before they asked), one more
    assert declared.types.knows("synthetic")
