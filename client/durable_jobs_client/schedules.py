"""``AsyncSchedulesClient``: ScheduleService, jobs created on a cron schedule.

Reached as ``AsyncJobsClient(...).schedules``, acting for the client's ``user_id`` unless a
call names another; the same channel, token, deadline, retries and exceptions as the job
calls (an unknown schedule, or another user's, raises ``ScheduleNotFound``)::

    async with AsyncJobsClient(user_id="user-1") as jobs:
        spec = schedule_spec("0 9 * * 1-5", "synthetic", {"sleep_ms": 10}, time_zone="UTC")
        schedule = (await jobs.schedules.create(spec)).schedule
        await jobs.schedules.trigger(schedule.id)  # a job now, whatever the cron says

Answers are the generated messages (``durable_jobs_client.protos.schedule_service_pb2``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

import grpc

from durable_jobs_client._core import struct
from durable_jobs_client._pb.jobs.v1 import job_pb2, schedule_service_pb2_grpc
from durable_jobs_client._pb.jobs.v1 import schedule_service_pb2 as spb
from durable_jobs_client.admin import AsyncCall

Schedule = spb.Schedule
Overlap = Literal["skip", "allow", "cancel_previous"]
CatchUpMode = Literal["all", "latest"]

_OVERLAP = {
    "skip": spb.OVERLAP_POLICY_SKIP,
    "allow": spb.OVERLAP_POLICY_ALLOW,
    "cancel_previous": spb.OVERLAP_POLICY_CANCEL_PREVIOUS,
}
_CATCH_UP = {"all": spb.CATCH_UP_MODE_ALL, "latest": spb.CATCH_UP_MODE_LATEST}


def schedule_spec(
    cron: str,
    job_type: str,
    input: Mapping[str, Any] | None = None,
    *,
    time_zone: str = "",
    overlap: Overlap | None = None,
    catch_up_window: timedelta | None = None,
    catch_up_mode: CatchUpMode | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    priority: int | None = None,
    credential_id: str = "",
    target_type: str = "",
    target_id: str = "",
) -> spb.ScheduleSpec:
    """A ScheduleSpec: when (``cron`` in ``time_zone``, default UTC; five fields, or six with
    seconds first) and the job each slot creates (CreateJob's fields). Unset options take
    the service's defaults: overlap "skip", a 60 s catch-up window, catch-up mode "all"."""
    template = spb.JobTemplate(
        job_type=job_type,
        input=struct(input or {}),
        target_type=target_type,
        target_id=target_id,
    )
    if priority is not None:
        template.priority = priority
    if credential_id:
        template.credential_mode = job_pb2.CREDENTIAL_MODE_USER
        template.credential_id = credential_id
    spec = spb.ScheduleSpec(cron=cron, time_zone=time_zone, job_template=template)
    if overlap is not None:
        spec.overlap_policy = _OVERLAP[overlap]
    if catch_up_mode is not None:
        spec.catch_up_mode = _CATCH_UP[catch_up_mode]
    if catch_up_window is not None:
        spec.catch_up_window.FromTimedelta(catch_up_window)
    if start_at is not None:
        spec.start_at.FromDatetime(start_at)
    if end_at is not None:
        spec.end_at.FromDatetime(end_at)
    return spec


class AsyncSchedulesClient:
    """ScheduleService's calls as coroutines (``list`` as an async iterator)."""

    def __init__(self, call: AsyncCall, channel: grpc.aio.Channel, user_id: str) -> None:
        self._call = call
        self._stub = schedule_service_pb2_grpc.ScheduleServiceStub(channel)  # type: ignore[no-untyped-call]
        self.user_id = user_id

    async def create(
        self,
        spec: spb.ScheduleSpec,
        *,
        idempotency_key: str | None = None,
        paused: bool = False,
        user_id: str | None = None,
    ) -> spb.CreateScheduleResponse:
        """Stores a schedule (``.schedule``; ``.created`` False when the key's schedule
        already existed). Without an idempotency key one is made here, so that a retried
        create can never store two schedules."""
        request = spb.CreateScheduleRequest(
            user_id=user_id or self.user_id,
            spec=spec,
            idempotency_key=idempotency_key or f"client-{uuid.uuid4()}",
            paused=paused,
        )
        return await self._call(self._stub.CreateSchedule, request, spb.CreateScheduleResponse)

    async def get(self, schedule_id: str, *, user_id: str | None = None) -> spb.GetScheduleResponse:
        """The schedule (``.schedule``), its next fire times and its 20 most recent runs."""
        request = spb.GetScheduleRequest(schedule_id=schedule_id, user_id=user_id or self.user_id)
        return await self._call(self._stub.GetSchedule, request, spb.GetScheduleResponse)

    async def list_page(
        self, *, page_size: int = 0, page_token: str = "", user_id: str | None = None
    ) -> spb.ListSchedulesResponse:
        """One page of the user's schedules, newest first, and the next page's token."""
        request = spb.ListSchedulesRequest(
            user_id=user_id or self.user_id, page_size=page_size, page_token=page_token
        )
        return await self._call(self._stub.ListSchedules, request, spb.ListSchedulesResponse)

    async def list(
        self, *, page_size: int = 0, user_id: str | None = None
    ) -> AsyncIterator[Schedule]:
        """Every schedule of the user, newest first, fetched a page at a time."""
        token = ""
        while True:
            page = await self.list_page(page_size=page_size, page_token=token, user_id=user_id)
            for schedule in page.schedules:
                yield schedule
            token = page.next_page_token
            if not token:
                return

    async def update(
        self, schedule_id: str, spec: spb.ScheduleSpec, *, user_id: str | None = None
    ) -> Schedule:
        """Replaces the spec, whole; the next slot is computed anew from now."""
        request = spb.UpdateScheduleRequest(
            schedule_id=schedule_id, user_id=user_id or self.user_id, spec=spec
        )
        response = await self._call(self._stub.UpdateSchedule, request, spb.UpdateScheduleResponse)
        return response.schedule

    async def pause(self, schedule_id: str, *, user_id: str | None = None) -> Schedule:
        """Stops firing; slots passing while paused never fire."""
        request = spb.PauseScheduleRequest(schedule_id=schedule_id, user_id=user_id or self.user_id)
        response = await self._call(self._stub.PauseSchedule, request, spb.PauseScheduleResponse)
        return response.schedule

    async def resume(self, schedule_id: str, *, user_id: str | None = None) -> Schedule:
        """Fires again from the next slot after now."""
        request = spb.ResumeScheduleRequest(
            schedule_id=schedule_id, user_id=user_id or self.user_id
        )
        response = await self._call(self._stub.ResumeSchedule, request, spb.ResumeScheduleResponse)
        return response.schedule

    async def delete(self, schedule_id: str, *, user_id: str | None = None) -> None:
        """Deletes the schedule and its run history; the jobs it created stay."""
        request = spb.DeleteScheduleRequest(
            schedule_id=schedule_id, user_id=user_id or self.user_id
        )
        await self._call(self._stub.DeleteSchedule, request, spb.DeleteScheduleResponse)

    async def trigger(self, schedule_id: str, *, user_id: str | None = None) -> job_pb2.Job:
        """Creates the schedule's job now, whatever its cron, overlap policy or pause. Not
        replayed after UNAVAILABLE: the first call may have created the job."""
        request = spb.TriggerScheduleRequest(
            schedule_id=schedule_id, user_id=user_id or self.user_id
        )
        response = await self._call(
            self._stub.TriggerSchedule, request, spb.TriggerScheduleResponse, replay_safe=False
        )
        return response.job
