"""``FakeAsyncJobsClient``: ``AsyncJobsClient``'s methods over a ``JobServiceState``, each
answering as job_service does for the parts a client sees (ids, idempotency keys, the
user's own jobs, paging, cancel's transitions, signals), with ``.admin`` and
``.credentials`` over the same service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from typing import Any, Literal, overload

from durable_jobs_client._core import (
    DEFAULT_TIMEOUT,
    Partial,
    RetryPolicy,
    create_request,
    signal_request,
    with_key,
)
from durable_jobs_client._pb.jobs.v1 import job_pb2
from durable_jobs_client._pb.jobs.v1 import job_service_pb2 as pb
from durable_jobs_client._pb.jobs.v1 import usage_service_pb2 as upb
from durable_jobs_client.errors import (
    DeadlineExceeded,
    JobAlreadyCancelled,
    JobFinished,
    JobNotCancellable,
    JobsError,
)
from durable_jobs_client.statuses import TERMINAL
from durable_jobs_client.testing._admin import FakeAdminClient
from durable_jobs_client.testing._credentials import FakeCredentialsClient
from durable_jobs_client.testing._rules import cancel, made
from durable_jobs_client.testing._service import (
    JobServiceState,
    copy_of,
    id_ending,
    newest_first,
    now_stamp,
    page,
    refusal,
)
from durable_jobs_client.usage import Grouping, Usage, UsageTotals

S = job_pb2.JobStatus
Job = job_pb2.Job
Created = pb.CreateJobResponse
Sent = pb.SendSignalResponse


class FakeAsyncJobsClient:
    """``AsyncJobsClient`` in memory: the same methods and answers, over ``service``
    (a new empty ``JobServiceState`` when none is given)."""

    def __init__(
        self,
        service: JobServiceState | None = None,
        *,
        user_id: str = "",
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.service = service if service is not None else JobServiceState()
        self.user_id = user_id
        self.timeout = timeout
        self.retry = retry or RetryPolicy()

    @cached_property
    def admin(self) -> FakeAdminClient:
        """AdminService over the same service (every user's jobs)."""
        return FakeAdminClient(self.service)

    @cached_property
    def credentials(self) -> FakeCredentialsClient:
        """CredentialService over the same service, for this client's user."""
        return FakeCredentialsClient(self.service, self.user_id)

    async def __aenter__(self) -> FakeAsyncJobsClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.service.called("close", {})

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
        answer = await self.service.called("create", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        request = create_request(
            user_id or self.user_id,
            job_type,
            input,
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
        return made(self.service, request)

    async def create_many(
        self, requests: Sequence[pb.CreateJobRequest]
    ) -> list[Created | JobsError]:
        answer = await self.service.called("create_many", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        results: list[Created | JobsError] = []
        for request in requests:
            try:
                results.append(made(self.service, with_key(request)))
            except JobsError as refused:  # this request only, as CreateJobs answers
                results.append(refused)
        return results

    async def get(self, job_id: str, *, user_id: str | None = None) -> Job:
        answer = await self.service.called("get", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        return copy_of(self.service.job(job_id, user_id or self.user_id), internal=False)

    async def cancel(self, job_id: str, *, user_id: str | None = None) -> Job:
        answer = await self.service.called("cancel", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        job = self.service.job(job_id, user_id or self.user_id)
        stopping = job.status == job_pb2.JOB_STATUS_CANCEL_REQUESTED
        if not cancel(self.service, job) and not stopping:
            if job.status == job_pb2.JOB_STATUS_CANCELLED:
                raise refusal(JobAlreadyCancelled, "the job is already cancelled")
            status = S.Name(job.status).removeprefix("JOB_STATUS_").lower()
            raise refusal(JobNotCancellable, f"a {status} job cannot be cancelled")
        return copy_of(job, internal=False)

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
        """One page of the user's jobs, newest first (see ``AsyncJobsClient.list_page``)."""
        answer = await self.service.called("list_page", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        owner = user_id or self.user_id
        ending = id_ending(id_suffix) if id_suffix else None
        found = [
            j
            for j in newest_first(self.service.jobs.values())
            if j.user_id == owner
            and (not target_type or j.target_type == target_type)
            and (not target_id or j.target_id == target_id)
            and (ending is None or ending(j))
        ]
        jobs, token = page(found, page_size, page_token)
        shown = [copy_of(j, internal=False) for j in jobs]
        return pb.ListJobsResponse(jobs=shown, next_page_token=token)

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
            found = await self.list_page(
                user_id=user_id,
                page_size=page_size,
                page_token=token,
                target_type=target_type,
                target_id=target_id,
            )
            for job in found.jobs:
                yield job
            token = found.next_page_token
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
        """Stores a signal on an unfinished job (JobFinished once it has ended)."""
        answer = await self.service.called("signal", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        request = signal_request(user_id or self.user_id, job_id, name, payload, idempotency_key)
        job = self.service.job(job_id, request.user_id)

        def store() -> job_pb2.ReceivedSignal:
            if job.status in TERMINAL:
                raise refusal(JobFinished, "the job has finished; it takes no more signals")
            signal = job.signals.add(seq=job.signals_total + 1, name=name)
            now_stamp(signal.sent_at)
            job.signals_total += 1
            self.service.changed()
            return signal

        key = ("signal", job.id, request.idempotency_key)
        stored, created = self.service.once(key, store)
        return pb.SendSignalResponse(signal=stored, created=created)

    async def get_usage(
        self,
        start: date,
        end: date,
        *,
        group_by: Sequence[Grouping] = (),
        user_id: str | None = None,
    ) -> Usage:
        """``service.usage`` (by default: nothing spent)."""
        answer = await self.service.called("get_usage", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        if self.service.usage is not None:
            return self.service.usage
        return Usage([], UsageTotals(0, 0, 0, 0, Decimal(0)), upb.GetUsageResponse())

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
        """The job now, then each change (``service.update``) until it ends. No partial
        output: a fake runs no model."""
        answer = await self.service.called("watch", locals())
        if answer is not None:
            async for state in answer:
                yield state
            return
        owner = user_id or self.user_id
        last: tuple[Any, ...] | None = None
        while True:
            job = self.service.job(job_id, owner)
            seen = (job.status, job.progress, job.attempt_count, job.updated_at.ToNanoseconds())
            if seen != last:
                last = seen
                yield copy_of(job, internal=False)
            if job.status in TERMINAL:
                return
            await self.service.next_change()

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
