"""A schedule's job template input sealed at rest (issue 44): the ScheduleStore every
schedule use case goes through, around the real one. It seals the template's input under
the user's data key (bound to the schedule's id) before a create or an update stores it,
and opens it in every schedule a read or a firing round gets back; a schedule stored before
encryption reads as it is (``Sealer.open`` passes plaintext through)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime

from job_service.domain.envelopes import SCHEDULE_INPUT
from job_service.domain.schedules import Schedule, ScheduleRun, ScheduleSpec
from job_service.domain.selection import Cursor
from job_service.ports.schedules import Round, ScheduleStore
from job_service.usecases.sealing import Sealer


class SealedScheduleStore:
    def __init__(self, store: ScheduleStore, sealer: Sealer) -> None:
        self._store = store
        self._sealer = sealer

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
    ) -> tuple[Schedule, bool]:
        schedule, created = await self._store.create(
            schedule_id,
            user_id,
            await self._sealed(schedule_id, user_id, spec),
            idempotency_key=idempotency_key,
            request_hash=request_hash,
            paused=paused,
            next_fire_at=next_fire_at,
            created_by=created_by,
        )
        return await self._opened(schedule), created

    async def get(self, schedule_id: str, user_id: str) -> Schedule | None:
        return await self._opened_or_none(await self._store.get(schedule_id, user_id))

    async def runs(self, schedule_id: str, limit: int) -> list[ScheduleRun]:
        return await self._store.runs(schedule_id, limit)

    async def list(self, user_id: str, after: Cursor | None, limit: int) -> list[Schedule]:
        return [await self._opened(s) for s in await self._store.list(user_id, after, limit)]

    async def update(
        self,
        schedule_id: str,
        user_id: str,
        spec: ScheduleSpec,
        request_hash: str,
        next_fire_at: datetime | None,
        by: str | None = None,
    ) -> Schedule | None:
        sealed = await self._sealed(schedule_id, user_id, spec)
        updated = await self._store.update(
            schedule_id, user_id, sealed, request_hash, next_fire_at, by
        )
        return await self._opened_or_none(updated)

    async def set_paused(
        self,
        schedule_id: str,
        user_id: str,
        paused: bool,
        next_fire_at: datetime | None,
        by: str | None = None,
    ) -> Schedule | None:
        changed = await self._store.set_paused(schedule_id, user_id, paused, next_fire_at, by)
        return await self._opened_or_none(changed)

    async def delete(self, schedule_id: str, user_id: str) -> bool:
        return await self._store.delete(schedule_id, user_id)

    async def next_due(self) -> datetime | None:
        return await self._store.next_due()

    @contextlib.asynccontextmanager
    async def due(self, now: datetime, limit: int) -> AsyncIterator[Round]:
        async with self._store.due(now, limit) as round_:
            yield await self._opened_round(round_)

    @contextlib.asynccontextmanager
    async def one(self, schedule_id: str, user_id: str) -> AsyncIterator[Round]:
        async with self._store.one(schedule_id, user_id) as round_:
            yield await self._opened_round(round_)

    async def prune_runs(self, older_than_s: float, limit: int) -> int:
        return await self._store.prune_runs(older_than_s, limit)

    async def _sealed(self, schedule_id: str, user_id: str, spec: ScheduleSpec) -> ScheduleSpec:
        if not self._sealer.enabled:
            return spec
        sealed = await self._sealer.seal(user_id, schedule_id, SCHEDULE_INPUT, spec.template.input)
        return replace(spec, template=replace(spec.template, input=sealed))

    async def _opened(self, schedule: Schedule) -> Schedule:
        spec = schedule.spec
        opened = await self._sealer.open(
            schedule.user_id, schedule.id, SCHEDULE_INPUT, spec.template.input
        )
        if opened is spec.template.input:
            return schedule
        return replace(schedule, spec=replace(spec, template=replace(spec.template, input=opened)))

    async def _opened_or_none(self, schedule: Schedule | None) -> Schedule | None:
        return None if schedule is None else await self._opened(schedule)

    async def _opened_round(self, round_: Round) -> Round:
        """The round with its schedules' inputs opened (the round's own list, replaced:
        what its firing reads)."""
        round_.schedules = [await self._opened(s) for s in round_.schedules]
        return round_
