"""What the schedules use cases need from storage: CRUD, and firing rounds that hold the
due schedules locked in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from job_service.domain.jobs import NewJob
from job_service.domain.quotas import Quotas
from job_service.domain.schedules import RunOutcome, Schedule, ScheduleRun, ScheduleSpec
from job_service.domain.selection import Cursor
from job_service.ports.jobs import Stored


class Round(Protocol):
    """One transaction over the schedules it holds locked."""

    schedules: list[Schedule]

    async def create_job(self, new: NewJob, quotas: Quotas) -> Stored:
        """CreateJob's statement, in the round's transaction."""
        ...

    async def unfinished(self, job_id: str) -> bool: ...

    async def record(
        self,
        schedule_id: str,
        slots: Sequence[datetime],
        outcome: RunOutcome,
        job_id: str | None = None,
        detail: str | None = None,
    ) -> None: ...

    async def advance(
        self, schedule_id: str, next_fire_at: datetime | None, last_job_id: str | None
    ) -> None: ...

    def isolated(self) -> AbstractAsyncContextManager[None]: ...


class ScheduleStore(Protocol):
    async def create(
        self,
        schedule_id: str,
        user_id: str,
        spec: ScheduleSpec,
        *,
        idempotency_key: str | None,
        request_hash: str,
        paused: bool,
        next_fire_at: datetime | None,
        created_by: str | None,
    ) -> tuple[Schedule, bool]: ...

    async def get(self, schedule_id: str, user_id: str) -> Schedule | None: ...

    async def runs(self, schedule_id: str, limit: int) -> list[ScheduleRun]: ...

    async def list(self, user_id: str, after: Cursor | None, limit: int) -> list[Schedule]: ...

    async def update(
        self,
        schedule_id: str,
        user_id: str,
        spec: ScheduleSpec,
        request_hash: str,
        next_fire_at: datetime | None,
        by: str | None = None,
    ) -> Schedule | None:
        """``by``: the principal making the change (recorded as the schedule's updated_by)."""
        ...

    async def set_paused(
        self,
        schedule_id: str,
        user_id: str,
        paused: bool,
        next_fire_at: datetime | None,
        by: str | None = None,
    ) -> Schedule | None: ...

    async def delete(self, schedule_id: str, user_id: str) -> bool: ...

    async def next_due(self) -> datetime | None: ...

    def due(self, now: datetime, limit: int) -> AbstractAsyncContextManager[Round]: ...

    def one(self, schedule_id: str, user_id: str) -> AbstractAsyncContextManager[Round]: ...

    async def prune_runs(self, older_than_s: float, limit: int) -> int: ...
