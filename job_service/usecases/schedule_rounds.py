"""The firing round the loop of every replica runs (``usecases/firing.py``).

A slot fires exactly once: the loop of each replica claims due schedules with ``FOR UPDATE
SKIP LOCKED`` and, in that one transaction, creates each slot's job through CreateJob's
own path (``NewJobs.prepare``, the admission, + CreateJob's statement: same checks, quotas,
snapshot and dispatch row) under the idempotency key ``schedule:<id>:<slot>``, records the
slot and advances ``next_fire_at``. A replica killed mid-round commits nothing; the next round (its
own or another replica's) fires the slot then. docs/adr/0005-schedules.md has the why.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

from job_service import metrics
from job_service.domain.jobs import Job
from job_service.domain.schedules import OverlapPolicy, RunOutcome, Schedule, plan
from job_service.ports.schedules import Round, ScheduleStore
from job_service.usecases.jobs import Jobs
from job_service.usecases.new_jobs import NewJobs
from job_service.usecases.schedule_specs import slot_request
from shared.errors import JobsError

log = logging.getLogger(__name__)

# Due schedules one firing round claims: a round handles its schedules one after another
# (each a few statements), so many schedules due in the same second are split over
# parallel rounds (usecases/firing.py) and replicas by SKIP LOCKED.
FIRE_BATCH = 10


class ScheduleRounds:
    """Firing rounds over the due schedules, and the job of one slot (which a trigger
    creates too)."""

    def __init__(self, new_jobs: NewJobs, jobs: Jobs, store: ScheduleStore) -> None:
        self._new_jobs = new_jobs
        self._jobs = jobs
        self._store = store

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
                job = await self.slot_job(round_, schedule, slot)
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

    async def slot_job(
        self, round_: Round, schedule: Schedule, slot: datetime, principal: str = ""
    ) -> Job:
        """The job of a slot, admitted as CreateJob admits one and stored in the round
        (``principal``: who triggered it, as its created_by); the CreateJob error that
        refuses it."""
        request = slot_request(schedule.id, schedule.user_id, schedule.spec.template, slot)
        new = replace(
            # fresh: a key changed meanwhile would fail the round (it is fired again)
            await self._new_jobs.prepare(request, fresh=True),
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
