"""ScheduleService's use cases: create, read, list, change, pause, resume, delete and
trigger a schedule. A spec is checked by ``schedule_specs``; the slots fire in the rounds of
``schedule_rounds``, which the loop of every replica runs (``usecases/firing.py``) and which
a trigger shares; a template's input is sealed at rest (``sealed_schedules``) and its
request hash keyed by the user's data key. docs/adr/0005-schedules.md has the why.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from job_service import metrics
from job_service.domain.checks import require_name, require_uuid
from job_service.domain.jobs import Job
from job_service.domain.paging import PageTokens, page_size
from job_service.domain.schedules import RunOutcome, Schedule, ScheduleRun, spec_hash
from job_service.domain.selection import Cursor
from job_service.ports.schedules import ScheduleStore
from job_service.usecases.jobs import Jobs
from job_service.usecases.new_jobs import NewJobs
from job_service.usecases.schedule_rounds import ScheduleRounds
from job_service.usecases.schedule_specs import SpecRequest, validated_spec
from job_service.usecases.sealed_schedules import SealedScheduleStore
from job_service.usecases.sealing import Sealer
from shared.errors import FieldViolation, IdempotencyKeyReused, ScheduleNotFound

log = logging.getLogger(__name__)

RECENT_RUNS = 20
# a run's detail column holds this much (schedule_runs.detail)
RUN_DETAIL_CHARS = 100
RUN_RETENTION_S = 7 * 24 * 3600.0
PRUNE_BATCH = 1000
_SCHEDULES = ("schedules",)


@dataclass(frozen=True)
class ScheduleView:
    """GetSchedule's answer."""

    schedule: Schedule
    upcoming: list[datetime]
    runs: list[ScheduleRun]


class Schedules:
    def __init__(
        self,
        new_jobs: NewJobs,
        jobs: Jobs,
        store: ScheduleStore,
        tokens: PageTokens,
        sealer: Sealer | None = None,
    ) -> None:
        """``sealer`` seals each template's input at rest and keys its request hash (None:
        stored as they are)."""
        self._sealer = sealer or Sealer(None, None)
        self._new_jobs = new_jobs
        store = SealedScheduleStore(store, self._sealer)
        self._store = store
        self._tokens = tokens
        self._rounds = ScheduleRounds(new_jobs, jobs, store)
        # set when this replica changed a schedule: the firing loop looks again at once
        self.changed = asyncio.Event()

    async def create_schedule(
        self,
        user_id: str,
        asked: SpecRequest,
        *,
        idempotency_key: str = "",
        paused: bool = False,
        principal: str = "",
    ) -> tuple[Schedule, bool]:
        require_name("user_id", user_id)
        if idempotency_key:
            require_name("idempotency_key", idempotency_key)
        spec = await validated_spec(self._new_jobs, user_id, asked)
        now = datetime.now(UTC)
        plain_hash = spec_hash(spec)
        request_hash = await self._sealer.keyed_hash(user_id, plain_hash)
        schedule, created = await self._store.create(
            str(uuid.uuid4()),
            user_id,
            spec,
            idempotency_key=idempotency_key or None,
            request_hash=request_hash,
            paused=paused,
            next_fire_at=None if paused else spec.first_slot(now),
            created_by=principal or None,
        )
        # a schedule created before encryption holds the plain hash
        if not created and schedule.request_hash not in (request_hash, plain_hash):
            raise IdempotencyKeyReused(
                "this idempotency key was used for a different schedule",
                [FieldViolation("idempotency_key", "already used with another spec")],
                metadata={"schedule_id": schedule.id},
            )
        self.changed.set()
        return schedule, created

    async def get_schedule(self, schedule_id: str, user_id: str) -> ScheduleView:
        schedule = await self._get(schedule_id, user_id)
        upcoming: list[datetime] = []
        if schedule.next_fire_at is not None:
            upcoming = [
                schedule.next_fire_at,
                *schedule.spec.upcoming(schedule.next_fire_at, 4),
            ]
        runs = await self._store.runs(schedule.id, RECENT_RUNS)
        return ScheduleView(schedule, upcoming, runs)

    async def list_schedules(
        self, user_id: str, requested_size: int, token: str
    ) -> tuple[list[Schedule], str]:
        require_name("user_id", user_id)
        size = page_size(requested_size)
        scope = {"listing": "schedules", "user_id": user_id}
        start = self._tokens.read(token, scope, _SCHEDULES)["schedules"]
        found = await self._store.list(user_id, None if start == "start" else start, size + 1)
        page, more = found[:size], len(found) > size
        last = Cursor(page[-1].created_at, page[-1].id) if more else None
        return page, self._tokens.issue(scope, {"schedules": last})

    # Each change below records ``principal`` (the caller's: whose token made the call) as
    # the schedule's updated_by, and logs it; a trigger writes it on the run and the job.

    async def update_schedule(
        self, schedule_id: str, user_id: str, asked: SpecRequest, principal: str = ""
    ) -> Schedule:
        current = await self._get(schedule_id, user_id)
        spec = await validated_spec(self._new_jobs, user_id, asked)
        next_fire_at = None if current.paused else spec.first_slot(datetime.now(UTC))
        request_hash = await self._sealer.keyed_hash(user_id, spec_hash(spec))
        updated = await self._store.update(
            schedule_id, user_id, spec, request_hash, next_fire_at, principal or None
        )
        if updated is None:
            raise ScheduleNotFound("no such schedule")
        log.info("schedule %s updated by %s", schedule_id, principal or "-")
        self.changed.set()
        return updated

    async def pause_schedule(self, schedule_id: str, user_id: str, principal: str = "") -> Schedule:
        await self._get(schedule_id, user_id)
        paused = await self._store.set_paused(schedule_id, user_id, True, None, principal or None)
        if paused is None:
            raise ScheduleNotFound("no such schedule")
        log.info("schedule %s paused by %s", schedule_id, principal or "-")
        return paused

    async def resume_schedule(
        self, schedule_id: str, user_id: str, principal: str = ""
    ) -> Schedule:
        current = await self._get(schedule_id, user_id)
        if not current.paused:
            return current
        next_fire_at = current.spec.first_slot(datetime.now(UTC))
        resumed = await self._store.set_paused(
            schedule_id, user_id, False, next_fire_at, principal or None
        )
        if resumed is None:
            raise ScheduleNotFound("no such schedule")
        log.info("schedule %s resumed by %s", schedule_id, principal or "-")
        self.changed.set()
        return resumed

    async def delete_schedule(self, schedule_id: str, user_id: str, principal: str = "") -> None:
        _require_ids(schedule_id, user_id)
        if not await self._store.delete(schedule_id, user_id):
            raise ScheduleNotFound("no such schedule")
        log.info("schedule %s deleted by %s", schedule_id, principal or "-")

    async def trigger_schedule(self, schedule_id: str, user_id: str, principal: str = "") -> Job:
        """The schedule's job, created now (a TRIGGERED run, its detail and the job's
        created_by naming the caller); CreateJob's errors (a quota, a template no longer
        valid) are the caller's."""
        _require_ids(schedule_id, user_id)
        slot = datetime.now(UTC)
        async with self._store.one(schedule_id, user_id) as round_:
            if not round_.schedules:
                raise ScheduleNotFound("no such schedule")
            schedule = round_.schedules[0]
            job = await self._rounds.slot_job(round_, schedule, slot, principal)
            detail = f"triggered by {principal}"[:RUN_DETAIL_CHARS] if principal else None
            await round_.record(schedule.id, [slot], RunOutcome.TRIGGERED, job.id, detail)
            await round_.advance(schedule.id, schedule.next_fire_at, job.id)
        self._new_jobs.wake()
        metrics.schedule_runs(RunOutcome.TRIGGERED.value)
        return job

    async def fire_due(self, now: datetime | None = None) -> int:
        """One firing round over the schedules due now that no other replica holds: how
        many schedules it handled (``schedule_rounds``)."""
        return await self._rounds.fire_due(now)

    async def next_due(self) -> datetime | None:
        return await self._store.next_due()

    async def prune_runs(self) -> int:
        """The retention of run history: runs older than RUN_RETENTION_S."""
        return await self._store.prune_runs(RUN_RETENTION_S, PRUNE_BATCH)

    async def _get(self, schedule_id: str, user_id: str) -> Schedule:
        _require_ids(schedule_id, user_id)
        schedule = await self._store.get(schedule_id, user_id)
        if schedule is None:
            raise ScheduleNotFound("no such schedule")
        return schedule


def _require_ids(schedule_id: str, user_id: str) -> None:
    require_uuid("schedule_id", schedule_id)
    require_name("user_id", user_id)
