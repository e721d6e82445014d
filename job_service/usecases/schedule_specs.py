"""A schedule's spec as ScheduleService takes it, and its validation: the cron, the windows,
and the job template judged as CreateJob judges a job (nothing stored). Also the CreateJob
of a slot, which the validation and the firing round share."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from job_service.domain.admission import CreateRequest, Pins
from job_service.domain.schedules import (
    DEFAULT_CATCH_UP_WINDOW_S,
    MAX_CATCH_UP_WINDOW_S,
    CatchUpMode,
    Cron,
    JobTemplate,
    OverlapPolicy,
    ScheduleSpec,
    slot_key,
)
from job_service.usecases.new_jobs import NewJobs
from shared.errors import FieldViolation, InvalidInput


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


async def validated_spec(new_jobs: NewJobs, user_id: str, asked: SpecRequest) -> ScheduleSpec:
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
        await new_jobs.prepare(slot_request(str(uuid.UUID(int=0)), user_id, spec.template, now))
    except InvalidInput as error:
        raise _under("spec.job_template.", error) from None
    if spec.first_slot(now) is None:
        raise InvalidInput(
            "the schedule would never fire",
            [FieldViolation("spec.end_at", "after the first slot")],
        )
    return spec


def slot_request(schedule_id: str, user_id: str, t: JobTemplate, slot: datetime) -> CreateRequest:
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
