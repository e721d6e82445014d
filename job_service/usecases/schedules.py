"""ScheduleService's use cases, and the firing round the loop of every replica runs
(``usecases/firing.py``).

A slot fires exactly once: the loop of each replica claims due schedules with ``FOR UPDATE
SKIP LOCKED`` and, in that one transaction, creates each slot's job through CreateJob's
own path (``NewJobs.prepare``, the admission, + CreateJob's statement: same checks, quotas,
snapshot and dispatch row) under the idempotency key ``schedule:<id>:<slot>``, records the
slot and advances ``next_fire_at``. A replica killed mid-round commits nothing; the next round (its
own or another replica's) fires the slot then. docs/adr/0005-schedules.md has the why.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from job_service import metrics
from job_service.domain.admission import CreateRequest, Pins
from job_service.domain.checks import require_name, require_uuid
from job_service.domain.jobs import Job
from job_service.domain.paging import PageTokens, page_size
from job_service.domain.schedules import (
    DEFAULT_CATCH_UP_WINDOW_S,
    MAX_CATCH_UP_WINDOW_S,
    CatchUpMode,
    Cron,
    JobTemplate,
    OverlapPolicy,
    RunOutcome,
    Schedule,
    ScheduleRun,
    ScheduleSpec,
    plan,
    slot_key,
    spec_hash,
)
from job_service.domain.selection import Cursor
from job_service.ports.schedules import Round, ScheduleStore
from job_service.usecases.jobs import Jobs
from job_service.usecases.new_jobs import NewJobs
from shared.errors import (
    FieldViolation,
    IdempotencyKeyReused,
    InvalidInput,
    JobsError,
    ScheduleNotFound,
)

log = logging.getLogger(__name__)

RECENT_RUNS = 20
# Due schedules one firing round claims: a round handles its schedules one after another
# (each a few statements), so many schedules due in the same second are split over
# parallel rounds (usecases/firing.py) and replicas by SKIP LOCKED.
FIRE_BATCH = 10
# a run's detail column holds this much (schedule_runs.detail)
RUN_DETAIL_CHARS = 100
RUN_RETENTION_S = 7 * 24 * 3600.0
PRUNE_BATCH = 1000
_SCHEDULES = ("schedules",)


@dataclass(frozen=True)
class SpecRequest:
    """A schedule's spec as the API takes it, before validation."""

    cron: str
    time_zone: str
    template: JobTemplate
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    catch_up_window_s: float = 0.0
    catch_up: CatchUpMode = CatchUpMode.ALL
    start_at: datetime | None = None
    end_at: datetime | None = None


@dataclass(frozen=True)
class ScheduleView:
    """GetSchedule's answer."""

    schedule: Schedule
    upcoming: list[datetime]
    runs: list[ScheduleRun]


class Schedules:
    def __init__(
        self, new_jobs: NewJobs, jobs: Jobs, store: ScheduleStore, tokens: PageTokens
    ) -> None:
        self._new_jobs = new_jobs
        self._jobs = jobs
        self._store = store
        self._tokens = tokens
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
        spec = await self._validate(user_id, asked)
        now = datetime.now(UTC)
        request_hash = spec_hash(spec)
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
        if not created and schedule.request_hash != request_hash:
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
        spec = await self._validate(user_id, asked)
        next_fire_at = None if current.paused else spec.first_slot(datetime.now(UTC))
        updated = await self._store.update(
            schedule_id, user_id, spec, spec_hash(spec), next_fire_at, principal or None
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
            job = await self._slot_job(round_, schedule, slot, principal)
            detail = f"triggered by {principal}"[:RUN_DETAIL_CHARS] if principal else None
            await round_.record(schedule.id, [slot], RunOutcome.TRIGGERED, job.id, detail)
            await round_.advance(schedule.id, schedule.next_fire_at, job.id)
        self._new_jobs.wake()
        metrics.schedule_runs(RunOutcome.TRIGGERED.value)
        return job

    async def fire_due(self, now: datetime | None = None) -> int:
        """One firing round over the schedules due now that no other replica holds: how
        many schedules it handled."""
        now = now or datetime.now(UTC)
        fired: list[datetime] = []
        async with self._store.due(now, FIRE_BATCH) as round_:
            for schedule in round_.schedules:
                try:
                    async with round_.isolated():
                        fired += await self._fire(round_, schedule, now)
                except Exception:
                    # its savepoint is rolled back; the others' slots still commit
                    log.exception("schedule %s: firing failed; retried next round", schedule.id)
            handled = len(round_.schedules)
        if fired:
            self._new_jobs.wake()
            done = datetime.now(UTC)
            for slot in fired:
                metrics.schedule_fired((done - slot).total_seconds())
        return handled

    async def _fire(self, round_: Round, schedule: Schedule, now: datetime) -> list[datetime]:
        """The slots of one due schedule, in the round: fired, skipped or refused, and the
        schedule advanced. The slots whose job was created."""
        assert schedule.next_fire_at is not None, "claimed schedules are due"
        decided = plan(schedule.spec, schedule.next_fire_at, now)
        await round_.record(schedule.id, decided.missed, RunOutcome.SKIPPED_MISSED)
        metrics.schedule_runs(RunOutcome.SKIPPED_MISSED.value, len(decided.missed))
        if decided.missed:
            log.warning(
                "schedule %s: %d%s slots missed (outside the catch-up window)",
                schedule.id,
                len(decided.missed),
                "+" if decided.unrecorded_misses else "",
            )
        last, fired = schedule.last_job_id, []
        for slot in decided.fire:
            if (
                schedule.spec.overlap is not OverlapPolicy.ALLOW
                and last is not None
                and await round_.unfinished(last)
            ):
                if schedule.spec.overlap is OverlapPolicy.SKIP:
                    await round_.record(schedule.id, [slot], RunOutcome.SKIPPED_OVERLAP)
                    metrics.schedule_runs(RunOutcome.SKIPPED_OVERLAP.value)
                    continue
                await self._cancel_previous(last, schedule.user_id)
            try:
                job = await self._slot_job(round_, schedule, slot)
            except JobsError as error:
                await round_.record(
                    schedule.id, [slot], RunOutcome.REFUSED, detail=error.reason.value
                )
                metrics.schedule_runs(RunOutcome.REFUSED.value)
                continue
            await round_.record(schedule.id, [slot], RunOutcome.FIRED, job.id)
            last = job.id
            fired.append(slot)
        await round_.advance(schedule.id, decided.next_fire_at, last)
        return fired

    async def _slot_job(
        self, round_: Round, schedule: Schedule, slot: datetime, principal: str = ""
    ) -> Job:
        """The job of a slot, admitted as CreateJob admits one and stored in the round
        (``principal``: who triggered it, as its created_by); the CreateJob error that
        refuses it."""
        request = _job_request(schedule.id, schedule.user_id, schedule.spec.template, slot)
        new = replace(
            await self._new_jobs.prepare(request),
            schedule_id=schedule.id,
            scheduled_for=slot,
            created_by=principal or None,
        )
        job, _ = self._new_jobs.settle(new, await round_.create_job(new, self._new_jobs.quotas))
        return job

    async def _cancel_previous(self, job_id: str, user_id: str) -> None:
        try:
            await self._jobs.cancel_job(job_id, user_id)
        except JobsError:  # finished meanwhile, or of a type that cannot be cancelled
            log.info("schedule's previous job %s not cancelled", job_id)

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

    async def _validate(self, user_id: str, asked: SpecRequest) -> ScheduleSpec:
        """The spec, or InvalidInput naming every bad field under ``spec.``."""
        try:
            cron = Cron.parse(asked.cron, asked.time_zone)
        except InvalidInput as error:
            raise _under("spec.", error) from None
        window = asked.catch_up_window_s or DEFAULT_CATCH_UP_WINDOW_S
        if not 0 < window <= MAX_CATCH_UP_WINDOW_S:
            raise InvalidInput(
                "catch_up_window is out of range",
                [FieldViolation("spec.catch_up_window", "0 (default 60 s) .. 7 days")],
            )
        now = datetime.now(UTC)
        if asked.end_at is not None and (
            asked.end_at <= now or (asked.start_at is not None and asked.end_at <= asked.start_at)
        ):
            raise InvalidInput(
                "end_at must be in the future and after start_at",
                [FieldViolation("spec.end_at", "in the future, after start_at")],
            )
        spec = ScheduleSpec(
            cron=cron,
            template=asked.template,
            overlap=asked.overlap,
            catch_up_window_s=window,
            catch_up=asked.catch_up,
            start_at=asked.start_at,
            end_at=asked.end_at,
        )
        try:
            # the template is judged as CreateJob judges a job (nothing stored)
            await self._new_jobs.prepare(
                _job_request(str(uuid.UUID(int=0)), user_id, spec.template, now)
            )
        except InvalidInput as error:
            raise _under("spec.job_template.", error) from None
        if spec.first_slot(now) is None:
            raise InvalidInput(
                "the schedule would never fire",
                [FieldViolation("spec.end_at", "after the first slot")],
            )
        return spec


def _job_request(schedule_id: str, user_id: str, t: JobTemplate, slot: datetime) -> CreateRequest:
    """The CreateJob of a slot: the template, under the slot's idempotency key."""
    return CreateRequest(
        user_id=user_id,
        job_type=t.job_type,
        raw_input=t.input,
        idempotency_key=slot_key(schedule_id, slot),
        priority=t.priority,
        credential_mode=t.credential_mode,
        credential_id=t.credential_id,
        pins=Pins(target_type=t.target_type, target_id=t.target_id),
    )


def _under(prefix: str, error: InvalidInput) -> InvalidInput:
    """The same refusal with its field violations named under ``prefix``."""
    moved = type(error)(
        error.message, [FieldViolation(prefix + v.field, v.description) for v in error.violations]
    )
    return moved


def _require_ids(schedule_id: str, user_id: str) -> None:
    require_uuid("schedule_id", schedule_id)
    require_name("user_id", user_id)
