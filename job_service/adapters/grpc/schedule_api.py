"""ScheduleService: cron schedules of jobs. Errors are raised, never aborted here: the
ErrorInterceptor translates them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.convert import (
    CREDENTIAL_MODE_TO_PB,
    credential_mode_from_pb,
    job_to_pb,
)
from job_service.domain.schedules import (
    CatchUpMode,
    JobTemplate,
    OverlapPolicy,
    RunOutcome,
    Schedule,
    ScheduleRun,
)
from job_service.usecases.schedule_specs import SpecRequest
from job_service.usecases.schedules import Schedules
from shared.errors import FieldViolation, InvalidInput
from shared.pb.jobs.v1 import schedule_service_pb2 as pb
from shared.pb.jobs.v1 import schedule_service_pb2_grpc
from shared.pbconv import dict_from_struct, timestamp

_OVERLAP = {
    pb.OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy.SKIP,
    pb.OVERLAP_POLICY_SKIP: OverlapPolicy.SKIP,
    pb.OVERLAP_POLICY_ALLOW: OverlapPolicy.ALLOW,
    pb.OVERLAP_POLICY_CANCEL_PREVIOUS: OverlapPolicy.CANCEL_PREVIOUS,
}
_OVERLAP_TO_PB = {
    OverlapPolicy.SKIP: pb.OVERLAP_POLICY_SKIP,
    OverlapPolicy.ALLOW: pb.OVERLAP_POLICY_ALLOW,
    OverlapPolicy.CANCEL_PREVIOUS: pb.OVERLAP_POLICY_CANCEL_PREVIOUS,
}
_CATCH_UP = {
    pb.CATCH_UP_MODE_UNSPECIFIED: CatchUpMode.ALL,
    pb.CATCH_UP_MODE_ALL: CatchUpMode.ALL,
    pb.CATCH_UP_MODE_LATEST: CatchUpMode.LATEST,
}
_CATCH_UP_TO_PB = {
    CatchUpMode.ALL: pb.CATCH_UP_MODE_ALL,
    CatchUpMode.LATEST: pb.CATCH_UP_MODE_LATEST,
}
_OUTCOME_TO_PB = {
    outcome: pb.ScheduleRun.Outcome.Value(f"OUTCOME_{outcome.name}") for outcome in RunOutcome
}


class ScheduleServicer(schedule_service_pb2_grpc.ScheduleServiceServicer):
    def __init__(self, schedules: Schedules, tokens: TokenTable) -> None:
        self._schedules = schedules
        self._tokens = tokens

    def _caller(self, context: grpc.aio.ServicerContext) -> str:
        """The principal whose token made the call: who an action is attributed to."""
        return self._tokens.caller(context.invocation_metadata())

    async def CreateSchedule(
        self, request: pb.CreateScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateScheduleResponse:
        schedule, created = await self._schedules.create_schedule(
            request.user_id,
            _spec_request(request.spec),
            idempotency_key=request.idempotency_key,
            paused=request.paused,
            principal=self._caller(context),
        )
        return pb.CreateScheduleResponse(schedule=schedule_to_pb(schedule), created=created)

    async def GetSchedule(
        self, request: pb.GetScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetScheduleResponse:
        view = await self._schedules.get_schedule(request.schedule_id, request.user_id)
        return pb.GetScheduleResponse(
            schedule=schedule_to_pb(view.schedule),
            next_fire_times=view.upcoming,
            recent_runs=[run_to_pb(r) for r in view.runs],
        )

    async def ListSchedules(
        self, request: pb.ListSchedulesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSchedulesResponse:
        schedules, token = await self._schedules.list_schedules(
            request.user_id, request.page_size, request.page_token
        )
        return pb.ListSchedulesResponse(
            schedules=[schedule_to_pb(s) for s in schedules], next_page_token=token
        )

    async def UpdateSchedule(
        self, request: pb.UpdateScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateScheduleResponse:
        spec = request.spec
        if request.update_mask.paths:
            spec = await self._masked(request)
        schedule = await self._schedules.update_schedule(
            request.schedule_id, request.user_id, _spec_request(spec), self._caller(context)
        )
        return pb.UpdateScheduleResponse(schedule=schedule_to_pb(schedule))

    async def _masked(self, request: pb.UpdateScheduleRequest) -> pb.ScheduleSpec:
        """The schedule's current spec with the fields ``update_mask`` names taken from
        the request (AIP-134's partial update)."""
        mask = request.update_mask
        if not mask.IsValidForDescriptor(pb.ScheduleSpec.DESCRIPTOR):  # type: ignore[arg-type]
            raise InvalidInput(
                "update_mask names a field a schedule spec does not have",
                [FieldViolation("update_mask", "paths of ScheduleSpec, e.g. cron, time_zone")],
            )
        view = await self._schedules.get_schedule(request.schedule_id, request.user_id)
        spec = schedule_to_pb(view.schedule).spec
        mask.MergeMessage(
            request.spec, spec, replace_message_field=True, replace_repeated_field=True
        )
        return spec

    async def PauseSchedule(
        self, request: pb.PauseScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.PauseScheduleResponse:
        schedule = await self._schedules.pause_schedule(
            request.schedule_id, request.user_id, self._caller(context)
        )
        return pb.PauseScheduleResponse(schedule=schedule_to_pb(schedule))

    async def ResumeSchedule(
        self, request: pb.ResumeScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResumeScheduleResponse:
        schedule = await self._schedules.resume_schedule(
            request.schedule_id, request.user_id, self._caller(context)
        )
        return pb.ResumeScheduleResponse(schedule=schedule_to_pb(schedule))

    async def DeleteSchedule(
        self, request: pb.DeleteScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteScheduleResponse:
        await self._schedules.delete_schedule(
            request.schedule_id, request.user_id, self._caller(context)
        )
        return pb.DeleteScheduleResponse()

    async def TriggerSchedule(
        self, request: pb.TriggerScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.TriggerScheduleResponse:
        job = await self._schedules.trigger_schedule(
            request.schedule_id, request.user_id, self._caller(context)
        )
        return pb.TriggerScheduleResponse(job=job_to_pb(job))


def _spec_request(spec: pb.ScheduleSpec) -> SpecRequest:
    t = spec.job_template
    if spec.overlap_policy not in _OVERLAP:
        raise _unknown("spec.overlap_policy", "an OVERLAP_POLICY_ value")
    if spec.catch_up_mode not in _CATCH_UP:
        raise _unknown("spec.catch_up_mode", "a CATCH_UP_MODE_ value")
    try:
        mode = credential_mode_from_pb(t.credential_mode)
    except InvalidInput:
        raise _unknown("spec.job_template.credential_mode", "a CREDENTIAL_MODE_ value") from None
    window = spec.catch_up_window
    if window.seconds < 0 or window.nanos < 0:
        raise _unknown("spec.catch_up_window", "0 (default 60 s) .. 7 days")
    return SpecRequest(
        cron=spec.cron,
        time_zone=spec.time_zone,
        template=JobTemplate(
            job_type=t.job_type,
            input=dict_from_struct(t.input),
            priority=t.priority if t.HasField("priority") else None,
            credential_mode=mode,
            credential_id=t.credential_id,
            target_type=t.target_type,
            target_id=t.target_id,
        ),
        overlap=_OVERLAP[spec.overlap_policy],
        catch_up_window_s=window.ToTimedelta().total_seconds(),
        catch_up=_CATCH_UP[spec.catch_up_mode],
        start_at=_instant(spec, "start_at"),
        end_at=_instant(spec, "end_at"),
    )


def _instant(spec: pb.ScheduleSpec, name: str) -> datetime | None:
    if not spec.HasField(name):
        return None
    value: Timestamp = getattr(spec, name)
    try:
        return value.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise _unknown(f"spec.{name}", "a valid timestamp") from None


def _unknown(field: str, rule: str) -> InvalidInput:
    return InvalidInput(f"{field} is not valid", [FieldViolation(field, rule)])


def schedule_to_pb(schedule: Schedule) -> pb.Schedule:
    spec, t = schedule.spec, schedule.spec.template
    message = pb.Schedule(
        id=schedule.id,
        user_id=schedule.user_id,
        spec=pb.ScheduleSpec(
            cron=spec.cron.expression,
            time_zone=spec.cron.zone,
            job_template=pb.JobTemplate(
                job_type=t.job_type,
                priority=t.priority,
                credential_mode=CREDENTIAL_MODE_TO_PB[t.credential_mode],  # type: ignore[arg-type]
                credential_id=t.credential_id,
                target_type=t.target_type,
                target_id=t.target_id,
            ),
            overlap_policy=_OVERLAP_TO_PB[spec.overlap],
            catch_up_mode=_CATCH_UP_TO_PB[spec.catch_up],
            start_at=timestamp(spec.start_at),
            end_at=timestamp(spec.end_at),
        ),
        paused=schedule.paused,
        idempotency_key=schedule.idempotency_key or "",
        next_fire_at=timestamp(schedule.next_fire_at),
        created_at=timestamp(schedule.created_at),
        updated_at=timestamp(schedule.updated_at),
        updated_by=schedule.updated_by or "",
    )
    message.spec.job_template.input.update(t.input)
    message.spec.catch_up_window.FromTimedelta(timedelta(seconds=spec.catch_up_window_s))
    return message


def run_to_pb(run: ScheduleRun) -> pb.ScheduleRun:
    return pb.ScheduleRun(
        slot=timestamp(run.slot),
        outcome=_OUTCOME_TO_PB[run.outcome],  # type: ignore[arg-type]
        job_id=run.job_id or "",
        recorded_at=timestamp(run.recorded_at),
        detail=run.detail or "",
    )
