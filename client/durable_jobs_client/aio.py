"""``AsyncJobsClient``: the asyncio client of JobService over one channel, with
AdminService, CredentialService and ScheduleService over the same one (``.admin``,
``.credentials``, ``.schedules``); ``durable_jobs_client.client`` tells the rules both
clients keep."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
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
from durable_jobs_client.admin import AsyncAdminClient
from durable_jobs_client.credentials import AsyncCredentialsClient
from durable_jobs_client.errors import DeadlineExceeded, JobsError, error_from_rpc
from durable_jobs_client.schedules import AsyncSchedulesClient
from durable_jobs_client.usage import Grouping, Usage, usage_of, usage_request

T = TypeVar("T")
Job = job_pb2.Job
Created = pb.CreateJobResponse
Sent = pb.SendSignalResponse


class AsyncJobsClient(ClientBase):
    """The asyncio client: ``JobsClient``'s methods as coroutines and async iterators
    (``channel`` as there: one connection for many clients, e.g. a web console's users)."""

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
        channel: grpc.aio.Channel | None = None,
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
        self.channel = channel if channel is not None else self.config.aio_channel()
        self._stub: Any = job_service_pb2_grpc.JobServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self._usage: Any = usage_service_pb2_grpc.UsageServiceStub(self.channel)  # type: ignore[no-untyped-call]

    @cached_property
    def admin(self) -> AsyncAdminClient:
        """AdminService (the ``admin`` role) over this client's channel, token, deadline
        and retries."""
        return AsyncAdminClient(self._call, self.channel)

    @cached_property
    def credentials(self) -> AsyncCredentialsClient:
        """CredentialService: the user's own provider keys, over this client's channel."""
        return AsyncCredentialsClient(self._call, self.channel, self.user_id)

    @cached_property
    def schedules(self) -> AsyncSchedulesClient:
        """ScheduleService: the user's cron schedules, over this client's channel."""
        return AsyncSchedulesClient(self._call, self.channel, self.user_id)

    async def __aenter__(self) -> AsyncJobsClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def _call(
        self,
        method: Callable[..., Awaitable[Any]],
        request: Any,
        answer: type[T],
        replay_safe: bool = True,
    ) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await method(request, timeout=self.timeout, metadata=self._metadata)
                assert isinstance(response, answer)
                return response
            except grpc.RpcError as raised:
                error = error_from_rpc(raised)
                delay = self.retry.delay(error, attempt, replay_safe)
                if delay is None:
                    raise error from None
                await asyncio.sleep(delay)

    async def create(
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
        return await self._call(self._stub.CreateJob, request, pb.CreateJobResponse)

    async def create_many(
        self, requests: Sequence[pb.CreateJobRequest]
    ) -> list[Created | JobsError]:
        batch = pb.CreateJobsRequest(requests=[with_key(r) for r in requests])
        response = await self._call(self._stub.CreateJobs, batch, pb.CreateJobsResponse)
        return [result_of(r) for r in response.results]

    async def get(self, job_id: str, *, user_id: str | None = None) -> Job:
        request = pb.GetJobRequest(job_id=job_id, user_id=user_id or self.user_id)
        return (await self._call(self._stub.GetJob, request, pb.GetJobResponse)).job

    async def cancel(self, job_id: str, *, user_id: str | None = None) -> Job:
        request = pb.CancelJobRequest(job_id=job_id, user_id=user_id or self.user_id)
        return (await self._call(self._stub.CancelJob, request, pb.CancelJobResponse)).job

    async def list_page(
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
        return await self._call(self._stub.ListJobs, request, pb.ListJobsResponse)

    async def list(
        self,
        *,
        user_id: str | None = None,
        page_size: int = 0,
        target_type: str = "",
        target_id: str = "",
    ) -> AsyncIterator[Job]:
        token = ""
        while True:
            page = await self.list_page(
                user_id=user_id,
                page_size=page_size,
                page_token=token,
                target_type=target_type,
                target_id=target_id,
            )
            for job in page.jobs:
                yield job
            token = page.next_page_token
            if not token:
                return

    async def signal(
        self,
        job_id: str,
        name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        user_id: str | None = None,
    ) -> Sent:
        """Sends a signal to a job that has not finished; see ``JobsClient.signal``."""
        request = signal_request(user_id or self.user_id, job_id, name, payload, idempotency_key)
        return await self._call(self._stub.SendSignal, request, pb.SendSignalResponse)

    async def get_usage(
        self,
        start: date,
        end: date,
        *,
        group_by: Sequence[Grouping] = (),
        user_id: str | None = None,
    ) -> Usage:
        """What provider calls cost over the UTC days [start, end); see
        ``JobsClient.get_usage``."""
        request = usage_request(self._usage_user(user_id), start, end, group_by)
        response = await self._call(self._usage.GetUsage, request, upb.GetUsageResponse)
        return usage_of(response, group_by)

    @overload
    def watch(
        self,
        job_id: str,
        *,
        user_id: str | None = None,
        retry: RetryPolicy | None = None,
        partial_output: Literal[False] = False,
    ) -> AsyncIterator[Job]: ...

    @overload
    def watch(
        self,
        job_id: str,
        *,
        user_id: str | None = None,
        retry: RetryPolicy | None = None,
        partial_output: Literal[True],
    ) -> AsyncIterator[Job | Partial]: ...

    async def watch(
        self,
        job_id: str,
        *,
        user_id: str | None = None,
        retry: RetryPolicy | None = None,
        partial_output: bool = False,
    ) -> AsyncIterator[Job | Partial]:
        """See ``JobsClient.watch``."""
        request = self._watch_request(job_id, user_id, partial_output)
        policy = retry or self.retry
        state = WatchState()
        attempt = 0
        while not state.done:
            call = self._stub.WatchJob(request, metadata=self._metadata)
            try:
                async for answer in call:
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
                await asyncio.sleep(delay)
            finally:
                call.cancel()  # a watcher that stops early ends its stream now, not at GC

    async def wait(self, job_id: str, *, timeout: float, user_id: str | None = None) -> Job:
        """The job once terminal; DeadlineExceeded after ``timeout`` seconds."""

        async def last() -> Job:
            final: Job | None = None
            async for job in self.watch(job_id, user_id=user_id):
                final = job
            assert final is not None
            return final

        try:
            return await asyncio.wait_for(last(), timeout)
        except TimeoutError:
            raise DeadlineExceeded(f"job {job_id} not finished within {timeout} s") from None
