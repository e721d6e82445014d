"""``JobsClient``: the blocking client of JobService (and, as ``.schedules``, of
ScheduleService) over one channel; ``durable_jobs_client.client`` tells the rules both
clients keep."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any, Literal, TypeVar, overload

import grpc

from durable_jobs_client._core import (
    DEFAULT_TIMEOUT,
    ClientBase,
    Partial,
    RetryPolicy,
    WatchState,
    result_of,
    signal_request,
    with_key,
)
from durable_jobs_client._pb.jobs.v1 import job_pb2, job_service_pb2_grpc, usage_service_pb2_grpc
from durable_jobs_client._pb.jobs.v1 import job_service_pb2 as pb
from durable_jobs_client._pb.jobs.v1 import usage_service_pb2 as upb
from durable_jobs_client.errors import DeadlineExceeded, JobsError, error_from_rpc
from durable_jobs_client.schedules import SchedulesClient
from durable_jobs_client.statuses import TERMINAL
from durable_jobs_client.usage import Grouping, Usage, usage_of, usage_request

T = TypeVar("T")
Job = job_pb2.Job
Created = pb.CreateJobResponse
Sent = pb.SendSignalResponse


class JobsClient(ClientBase):
    """The blocking client. ``user_id`` is the user calls act for unless one is given.
    ``channel``: an open channel to call over instead of one of its own (the target and TLS
    settings are then the channel's, and ``close`` leaves it open), so that many clients,
    each with its own token, share one connection."""

    def __init__(
        self,
        target: str | None = None,
        *,
        user_id: str = "",
        token: str | None = None,
        ca_file: str | None = None,
        client_cert_file: str | None = None,
        client_key_file: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        channel: grpc.Channel | None = None,
    ) -> None:
        super().__init__(
            target,
            user_id=user_id,
            token=token,
            ca_file=ca_file,
            client_cert_file=client_cert_file,
            client_key_file=client_key_file,
            timeout=timeout,
            retry=retry,
            shared_channel=channel is not None,
        )
        self.channel = channel if channel is not None else self.config.sync_channel()
        self._stub: Any = job_service_pb2_grpc.JobServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self._usage: Any = usage_service_pb2_grpc.UsageServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def __enter__(self) -> JobsClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()

    @cached_property
    def schedules(self) -> SchedulesClient:
        """ScheduleService: the user's cron schedules, over this client's channel."""
        return SchedulesClient(self._call, self.channel, self.user_id)

    def _call(
        self,
        method: Callable[..., Any],
        request: Any,
        answer: type[T],
        replay_safe: bool = True,
    ) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = method(request, timeout=self.timeout, metadata=self._metadata)
                assert isinstance(response, answer)
                return response
            except grpc.RpcError as raised:
                error = error_from_rpc(raised)
                delay = self.retry.delay(error, attempt, replay_safe)
                if delay is None:
                    raise error from None
                time.sleep(delay)

    def create(
        self,
        job_type: str,
        input: Mapping[str, Any],
        *,
        user_id: str | None = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        deadline: datetime | None = None,
        target_type: str = "",
        target_id: str = "",
        prompt_version: str = "",
        output_schema_version: str = "",
        credential_id: str = "",
        depends_on: Sequence[str] = (),
        dependency_policy: str = "",
    ) -> Created:
        """Creates a job (``.job``; ``.created`` False when the key's job already existed)."""
        request = self._request(
            job_type,
            input,
            user_id,
            idempotency_key=idempotency_key,
            priority=priority,
            run_at=run_at,
            delay=delay,
            deadline=deadline,
            target_type=target_type,
            target_id=target_id,
            prompt_version=prompt_version,
            output_schema_version=output_schema_version,
            credential_id=credential_id,
            depends_on=depends_on,
            dependency_policy=dependency_policy,
        )
        return self._call(self._stub.CreateJob, request, pb.CreateJobResponse)

    def create_many(self, requests: Sequence[pb.CreateJobRequest]) -> list[Created | JobsError]:
        """CreateJobs (up to 500): per request, its answer or the error refusing it alone.
        Requests without an idempotency key get one (and keep it across retries)."""
        batch = pb.CreateJobsRequest(requests=[with_key(r) for r in requests])
        response = self._call(self._stub.CreateJobs, batch, pb.CreateJobsResponse)
        return [result_of(r) for r in response.results]

    def get(self, job_id: str, *, user_id: str | None = None) -> Job:
        request = pb.GetJobRequest(job_id=job_id, user_id=user_id or self.user_id)
        return self._call(self._stub.GetJob, request, pb.GetJobResponse).job

    def cancel(self, job_id: str, *, user_id: str | None = None) -> Job:
        request = pb.CancelJobRequest(job_id=job_id, user_id=user_id or self.user_id)
        return self._call(self._stub.CancelJob, request, pb.CancelJobResponse).job

    def list_page(
        self,
        *,
        user_id: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        target_type: str = "",
        target_id: str = "",
        id_suffix: str = "",
    ) -> pb.ListJobsResponse:
        """One page of the user's jobs and the token of the next (empty: the last page);
        ``id_suffix`` (6 to 32 hex digits) keeps the jobs whose id ends with it: a short id
        names one job when the page holds one."""
        request = pb.ListJobsRequest(
            user_id=user_id or self.user_id,
            page_size=page_size,
            page_token=page_token,
            target_type=target_type,
            target_id=target_id,
            id_suffix=id_suffix,
        )
        return self._call(self._stub.ListJobs, request, pb.ListJobsResponse)

    def list(
        self,
        *,
        user_id: str | None = None,
        page_size: int = 0,
        target_type: str = "",
        target_id: str = "",
    ) -> Iterator[Job]:
        """Every job of the user, newest first, fetched a page at a time as you iterate."""
        token = ""
        while True:
            page = self.list_page(
                user_id=user_id,
                page_size=page_size,
                page_token=token,
                target_type=target_type,
                target_id=target_id,
            )
            yield from page.jobs
            token = page.next_page_token
            if not token:
                return

    def signal(
        self,
        job_id: str,
        name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        user_id: str | None = None,
    ) -> Sent:
        """Sends a signal to a job that has not finished (``.signal``: its ``seq`` in the
        job's send order; ``.created`` False when the key's signal was stored before).
        JobFinished when the job has ended. Without an idempotency key one is made here,
        so a retried send never stores two signals."""
        request = signal_request(user_id or self.user_id, job_id, name, payload, idempotency_key)
        return self._call(self._stub.SendSignal, request, pb.SendSignalResponse)

    def get_usage(
        self,
        start: date,
        end: date,
        *,
        group_by: Sequence[Grouping] = (),
        user_id: str | None = None,
    ) -> Usage:
        """What provider calls cost over the UTC days [start, end), grouped as asked, for
        the client's user (``user_id``: another; "" every user, for the ``admin`` role)."""
        request = usage_request(self._usage_user(user_id), start, end, group_by)
        return usage_of(self._call(self._usage.GetUsage, request, upb.GetUsageResponse), group_by)

    @overload
    def watch(
        self,
        job_id: str,
        *,
        user_id: str | None = None,
        retry: RetryPolicy | None = None,
        partial_output: Literal[False] = False,
    ) -> Iterator[Job]: ...

    @overload
    def watch(
        self,
        job_id: str,
        *,
        user_id: str | None = None,
        retry: RetryPolicy | None = None,
        partial_output: Literal[True],
    ) -> Iterator[Job | Partial]: ...

    def watch(
        self,
        job_id: str,
        *,
        user_id: str | None = None,
        retry: RetryPolicy | None = None,
        partial_output: bool = False,
    ) -> Iterator[Job | Partial]:
        """The job's state now, then each change, ending after its terminal state. A stream
        that breaks (the service restarted) is opened again, as ``retry`` (default: the
        client's policy) allows; no state is shown twice. With ``partial_output`` the
        model's text also comes, as ``Partial`` pieces between the states (pieces sent
        while the stream was broken are missed: a gap in ``seq``)."""
        request = self._watch_request(job_id, user_id, partial_output)
        policy = retry or self.retry
        state = WatchState()
        attempt = 0
        while not state.done:
            try:
                for answer in self._stub.WatchJob(request, metadata=self._metadata):
                    attempt = 0
                    shown = state.shown(answer)
                    if shown is not None:
                        yield shown
                    if state.done:
                        return
            except grpc.RpcError as raised:
                error = error_from_rpc(raised)
                attempt += 1
                delay = policy.delay(error, attempt)
                if delay is None:
                    raise error from None
                time.sleep(delay)

    def wait(self, job_id: str, *, timeout: float, user_id: str | None = None) -> Job:
        """The job once terminal; DeadlineExceeded after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        request = self._watch_request(job_id, user_id, False)
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded(f"job {job_id} not finished within {timeout} s")
            try:
                for answer in self._stub.WatchJob(request, timeout=left, metadata=self._metadata):
                    if answer.job.status in TERMINAL:
                        job: Job = answer.job
                        return job
                    attempt = 0
            except grpc.RpcError as raised:
                error = error_from_rpc(raised)
                if isinstance(error, DeadlineExceeded):
                    raise DeadlineExceeded(
                        f"job {job_id} not finished within {timeout} s"
                    ) from None
                attempt += 1
                delay = self.retry.delay(error, attempt)
                if delay is None:
                    raise error from None
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
