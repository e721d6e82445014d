"""``AsyncSchedulesClient`` and ``SchedulesClient``: ScheduleService, jobs created on a cron
schedule.

Reached as ``AsyncJobsClient(...).schedules`` (or ``JobsClient(...).schedules``, blocking),
acting for the client's ``user_id`` unless a call names another; the same channel, token,
deadline, retries and exceptions as the job calls (an unknown schedule, or another
user's, raises ``ScheduleNotFound``)::

    async with AsyncJobsClient(user_id="user-1") as jobs:
        spec = schedule_spec("0 9 * * 1-5", "synthetic", {"sleep_ms": 10}, time_zone="UTC")
        schedule = (await jobs.schedules.create(spec)).schedule
        await jobs.schedules.trigger(schedule.id)  # a job now, whatever the cron says

Answers are the generated messages (``durable_jobs_client.protos.schedule_service_pb2``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, TypeVar, cast

import grpc

from durable_jobs_client._core import struct
from durable_jobs_client._pb.jobs.v1 import job_pb2, schedule_service_pb2_grpc
from durable_jobs_client._pb.jobs.v1 import schedule_service_pb2 as spb
from durable_jobs_client.admin import AsyncCall

Schedule = spb.Schedule
Overlap = Literal["skip", "allow", "cancel_previous"]
CatchUpMode = Literal["all", "latest"]
T = TypeVar("T")

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


class SyncCall(Protocol):
    """How the blocking client makes one call (``JobsClient._call``)."""

    def __call__(
        self,
        method: Callable[..., Any],
        request: Any,
        answer: type[T],
        replay_safe: bool = True,
    ) -> T: ...


@dataclass(frozen=True)
class _Call:
    """One ScheduleService call, built once for both clients: the stub's method name, the
    request, the answer's type, and whether it may be replayed after UNAVAILABLE."""

    method: str
    request: Any
    answer: type[Any]
    replay_safe: bool = True


class _Requests:
    """The requests of ScheduleService's calls, acting for ``user_id`` unless a call names
    another: what the sync and async clients share (they differ only in how they wait)."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id

    def _user(self, user_id: str | None) -> str:
        return user_id or self.user_id

    def _create(
        self, spec: spb.ScheduleSpec, idempotency_key: str | None, paused: bool, user_id: str | None
    ) -> _Call:
        # Without an idempotency key one is made here, so that a retried create can never
        # store two schedules.
        request = spb.CreateScheduleRequest(
            user_id=self._user(user_id),
            spec=spec,
            idempotency_key=idempotency_key or f"client-{uuid.uuid4()}",
            paused=paused,
        )
        return _Call("CreateSchedule", request, spb.CreateScheduleResponse)

    def _get(self, schedule_id: str, user_id: str | None) -> _Call:
        request = spb.GetScheduleRequest(schedule_id=schedule_id, user_id=self._user(user_id))
        return _Call("GetSchedule", request, spb.GetScheduleResponse)

    def _list_page(self, page_size: int, page_token: str, user_id: str | None) -> _Call:
        request = spb.ListSchedulesRequest(
            user_id=self._user(user_id), page_size=page_size, page_token=page_token
        )
        return _Call("ListSchedules", request, spb.ListSchedulesResponse)

    def _update(
        self,
        schedule_id: str,
        spec: spb.ScheduleSpec,
        user_id: str | None,
        fields: Sequence[str] = (),
    ) -> _Call:
        request = spb.UpdateScheduleRequest(
            schedule_id=schedule_id, user_id=self._user(user_id), spec=spec
        )
        request.update_mask.paths.extend(fields)
        return _Call("UpdateSchedule", request, spb.UpdateScheduleResponse)

    def _by_id(self, verb: str, schedule_id: str, user_id: str | None) -> _Call:
        """Pause, Resume, Delete and Trigger: a request naming the schedule. Trigger is not
        replayed after UNAVAILABLE: the first call may have created the job."""
        request_type = getattr(spb, f"{verb}ScheduleRequest")
        answer = getattr(spb, f"{verb}ScheduleResponse")
        request = request_type(schedule_id=schedule_id, user_id=self._user(user_id))
        return _Call(f"{verb}Schedule", request, answer, replay_safe=verb != "Trigger")


class AsyncSchedulesClient(_Requests):
    """ScheduleService's calls as coroutines (``list`` as an async iterator)."""

    def __init__(self, call: AsyncCall, channel: grpc.aio.Channel, user_id: str) -> None:
        super().__init__(user_id)
        self._call = call
        self._stub = schedule_service_pb2_grpc.ScheduleServiceStub(channel)  # type: ignore[no-untyped-call]

    async def _run(self, call: _Call) -> Any:
        method = getattr(self._stub, call.method)
        return await self._call(method, call.request, call.answer, call.replay_safe)

    async def create(
        self,
        spec: spb.ScheduleSpec,
        *,
        idempotency_key: str | None = None,
        paused: bool = False,
        user_id: str | None = None,
    ) -> spb.CreateScheduleResponse:
        """Stores a schedule (``.schedule``; ``.created`` False when the key's schedule
        already existed); a key is made when none is given."""
        answer: spb.CreateScheduleResponse = await self._run(
            self._create(spec, idempotency_key, paused, user_id)
        )
        return answer

    async def get(self, schedule_id: str, *, user_id: str | None = None) -> spb.GetScheduleResponse:
        """The schedule (``.schedule``), its next fire times and its 20 most recent runs."""
        answer: spb.GetScheduleResponse = await self._run(self._get(schedule_id, user_id))
        return answer

    async def list_page(
        self, *, page_size: int = 0, page_token: str = "", user_id: str | None = None
    ) -> spb.ListSchedulesResponse:
        """One page of the user's schedules, newest first, and the next page's token."""
        answer: spb.ListSchedulesResponse = await self._run(
            self._list_page(page_size, page_token, user_id)
        )
        return answer

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
        self,
        schedule_id: str,
        spec: spb.ScheduleSpec,
        *,
        user_id: str | None = None,
        fields: Sequence[str] = (),
    ) -> Schedule:
        """Replaces the spec, whole, or only the ``fields`` named (paths within
        ScheduleSpec, e.g. ``["cron"]``); the next slot is computed anew from now."""
        answer = await self._run(self._update(schedule_id, spec, user_id, fields))
        return cast(Schedule, answer.schedule)

    async def pause(self, schedule_id: str, *, user_id: str | None = None) -> Schedule:
        """Stops firing; slots passing while paused never fire."""
        answer = await self._run(self._by_id("Pause", schedule_id, user_id))
        return cast(Schedule, answer.schedule)

    async def resume(self, schedule_id: str, *, user_id: str | None = None) -> Schedule:
        """Fires again from the next slot after now."""
        answer = await self._run(self._by_id("Resume", schedule_id, user_id))
        return cast(Schedule, answer.schedule)

    async def delete(self, schedule_id: str, *, user_id: str | None = None) -> None:
        """Deletes the schedule and its run history; the jobs it created stay."""
        await self._run(self._by_id("Delete", schedule_id, user_id))

    async def trigger(self, schedule_id: str, *, user_id: str | None = None) -> job_pb2.Job:
        """Creates the schedule's job now, whatever its cron, overlap policy or pause."""
        answer = await self._run(self._by_id("Trigger", schedule_id, user_id))
        return cast(job_pb2.Job, answer.job)


class SchedulesClient(_Requests):
    """ScheduleService's calls, blocking: ``JobsClient(...).schedules``. The same calls as
    ``AsyncSchedulesClient``, and the same requests."""

    def __init__(self, call: SyncCall, channel: grpc.Channel, user_id: str) -> None:
        super().__init__(user_id)
        self._call = call
        self._stub = schedule_service_pb2_grpc.ScheduleServiceStub(channel)  # type: ignore[no-untyped-call]

    def _run(self, call: _Call) -> Any:
        method = getattr(self._stub, call.method)
        return self._call(method, call.request, call.answer, call.replay_safe)

    def create(
        self,
        spec: spb.ScheduleSpec,
        *,
        idempotency_key: str | None = None,
        paused: bool = False,
        user_id: str | None = None,
    ) -> spb.CreateScheduleResponse:
        """As ``AsyncSchedulesClient.create``."""
        answer: spb.CreateScheduleResponse = self._run(
            self._create(spec, idempotency_key, paused, user_id)
        )
        return answer

    def get(self, schedule_id: str, *, user_id: str | None = None) -> spb.GetScheduleResponse:
        """As ``AsyncSchedulesClient.get``."""
        answer: spb.GetScheduleResponse = self._run(self._get(schedule_id, user_id))
        return answer

    def list_page(
        self, *, page_size: int = 0, page_token: str = "", user_id: str | None = None
    ) -> spb.ListSchedulesResponse:
        """As ``AsyncSchedulesClient.list_page``."""
        answer: spb.ListSchedulesResponse = self._run(
            self._list_page(page_size, page_token, user_id)
        )
        return answer

    def list(self, *, page_size: int = 0, user_id: str | None = None) -> Iterator[Schedule]:
        """Every schedule of the user, newest first, fetched a page at a time."""
        token = ""
        while True:
            page = self.list_page(page_size=page_size, page_token=token, user_id=user_id)
            yield from page.schedules
            token = page.next_page_token
            if not token:
                return

    def update(
        self,
        schedule_id: str,
        spec: spb.ScheduleSpec,
        *,
        user_id: str | None = None,
        fields: Sequence[str] = (),
    ) -> Schedule:
        """As ``AsyncSchedulesClient.update``."""
        call = self._update(schedule_id, spec, user_id, fields)
        return cast(Schedule, self._run(call).schedule)

    def pause(self, schedule_id: str, *, user_id: str | None = None) -> Schedule:
        """As ``AsyncSchedulesClient.pause``."""
        return cast(Schedule, self._run(self._by_id("Pause", schedule_id, user_id)).schedule)

    def resume(self, schedule_id: str, *, user_id: str | None = None) -> Schedule:
        """As ``AsyncSchedulesClient.resume``."""
        return cast(Schedule, self._run(self._by_id("Resume", schedule_id, user_id)).schedule)

    def delete(self, schedule_id: str, *, user_id: str | None = None) -> None:
        """As ``AsyncSchedulesClient.delete``."""
        self._run(self._by_id("Delete", schedule_id, user_id))

    def trigger(self, schedule_id: str, *, user_id: str | None = None) -> job_pb2.Job:
        """As ``AsyncSchedulesClient.trigger`` (not replayed after UNAVAILABLE)."""
        return cast(job_pb2.Job, self._run(self._by_id("Trigger", schedule_id, user_id)).job)
