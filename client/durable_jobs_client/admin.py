"""``AsyncAdminClient``: AdminService, for operators (callers with the ``admin`` role).

Reached as ``AsyncJobsClient(...).admin``: the same channel, token, deadline, retries and
exceptions as the job calls. Answers are the generated messages (``durable_jobs_client.
protos``); listings answer one page and its ``next_page_token``, bulk operations one call
of the continuation (``jobctl cancel-many`` shows the loop)::

    async with AsyncJobsClient(token=admin_token) as jobs:
        which = job_selection(job_type="synthetic", status=JobStatus.JOB_STATUS_QUEUED)
        count = (await jobs.admin.cancel_jobs(which, dry_run=True)).matched
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

import grpc

from durable_jobs_client._pb.jobs.v1 import admin_service_pb2 as apb
from durable_jobs_client._pb.jobs.v1 import admin_service_pb2_grpc, job_pb2

T = TypeVar("T")


class AsyncCall(Protocol):
    """How a client makes one call: deadline, token, retries, errors (``AsyncJobsClient``)."""

    async def __call__(
        self,
        method: Callable[..., Awaitable[Any]],
        request: Any,
        answer: type[T],
        replay_safe: bool = True,
    ) -> T: ...


def job_selection(
    *,
    job_ids: Sequence[str] = (),
    job_type: str = "",
    status: job_pb2.JobStatus | None = None,
    queue: str = "",
    user_id: str = "",
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    target_type: str = "",
    target_id: str = "",
) -> apb.JobSelection:
    """Which jobs a bulk operation acts on: ids, or filters combined with AND. The service
    refuses an empty selection (INVALID_ARGUMENT), never reading it as "every job"."""
    selection = apb.JobSelection(
        job_ids=list(job_ids),
        job_type=job_type,
        queue=queue,
        user_id=user_id,
        target_type=target_type,
        target_id=target_id,
    )
    if status is not None:
        selection.status = status
    if created_after is not None:
        selection.created_after.FromDatetime(created_after)
    if created_before is not None:
        selection.created_before.FromDatetime(created_before)
    return selection


class AsyncAdminClient:
    """AdminService's calls as coroutines."""

    def __init__(self, call: AsyncCall, channel: grpc.aio.Channel) -> None:
        self._call = call
        self._stub: Any = admin_service_pb2_grpc.AdminServiceStub(channel)  # type: ignore[no-untyped-call]

    async def list_jobs(
        self,
        *,
        job_type: str = "",
        status: job_pb2.JobStatus | None = None,
        queue: str = "",
        user_id: str = "",
        target_type: str = "",
        target_id: str = "",
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        id_suffix: str = "",
    ) -> apb.AdminListJobsResponse:
        """One page of every user's jobs, newest first, filtered (a ``status`` of 0,
        JOB_STATUS_UNSPECIFIED, filters nothing, as None does)."""
        request = apb.AdminListJobsRequest(
            job_type=job_type,
            queue=queue,
            user_id=user_id,
            target_type=target_type,
            target_id=target_id,
            page_size=page_size,
            page_token=page_token,
            id_suffix=id_suffix,
        )
        if status is not None:
            request.status = status
        if created_after is not None:
            request.created_after.FromDatetime(created_after)
        if created_before is not None:
            request.created_before.FromDatetime(created_before)
        return await self._call(self._stub.ListJobs, request, apb.AdminListJobsResponse)

    async def get_job(self, job_id: str) -> job_pb2.Job:
        """Any user's job, with its internal error message and why it waits."""
        request = apb.AdminGetJobRequest(job_id=job_id)
        return (await self._call(self._stub.GetJob, request, apb.AdminGetJobResponse)).job

    async def retry_job(self, job_id: str, *, idempotency_key: str = "") -> job_pb2.Job:
        """A failed or cancelled job again, as a new job (the answer); LiveRetryExists
        while its original has a live retry. Replayed after UNAVAILABLE only with an
        ``idempotency_key`` (the same key answers the retry the first call made)."""
        request = apb.RetryJobRequest(job_id=job_id, idempotency_key=idempotency_key)
        response = await self._call(
            self._stub.RetryJob,
            request,
            apb.RetryJobResponse,
            replay_safe=bool(idempotency_key),
        )
        return response.job

    async def cancel_jobs(
        self,
        selection: apb.JobSelection,
        *,
        dry_run: bool = False,
        limit: int = 0,
        page_token: str = "",
        reason: str = "",
    ) -> apb.CancelJobsResponse:
        """One call of a bulk cancel: up to ``limit`` jobs, then ``next_page_token``.
        Replayed after UNAVAILABLE: a job cancelled twice is counted as skipped."""
        request = apb.CancelJobsRequest(
            selection=selection,
            dry_run=dry_run,
            limit=limit,
            page_token=page_token,
            reason=reason,
        )
        return await self._call(self._stub.CancelJobs, request, apb.CancelJobsResponse)

    async def retry_jobs(
        self,
        selection: apb.JobSelection,
        *,
        dry_run: bool = False,
        limit: int = 0,
        page_token: str = "",
        reason: str = "",
    ) -> apb.RetryJobsResponse:
        """One call of a bulk retry; each job's outcome carries its own status. Not
        replayed after UNAVAILABLE (unless a dry run): it may have made new jobs."""
        request = apb.RetryJobsRequest(
            selection=selection,
            dry_run=dry_run,
            limit=limit,
            page_token=page_token,
            reason=reason,
        )
        return await self._call(
            self._stub.RetryJobs, request, apb.RetryJobsResponse, replay_safe=dry_run
        )

    async def list_dead_letters(
        self, *, page_size: int = 0, page_token: str = ""
    ) -> apb.ListDeadLettersResponse:
        """One page of failed jobs and of dead outbox events (one token continues both)."""
        request = apb.ListDeadLettersRequest(page_size=page_size, page_token=page_token)
        return await self._call(self._stub.ListDeadLetters, request, apb.ListDeadLettersResponse)

    async def redrive_dead_letters(self, event_ids: Sequence[int] = ()) -> int:
        """Makes dead outbox events pending again (none named: every one); how many."""
        request = apb.RedriveDeadLettersRequest(event_ids=list(event_ids))
        response = await self._call(
            self._stub.RedriveDeadLetters, request, apb.RedriveDeadLettersResponse
        )
        return response.redriven

    async def list_job_definitions(self) -> list[apb.JobDefinitionInfo]:
        """The job type registry."""
        request = apb.ListJobDefinitionsRequest()
        response = await self._call(
            self._stub.ListJobDefinitions, request, apb.ListJobDefinitionsResponse
        )
        return list(response.definitions)

    async def list_queues(self) -> list[apb.QueueInfo]:
        """Every queue: paused, waiting, eligible, running, its limit."""
        request = apb.ListQueuesRequest()
        return list(
            (await self._call(self._stub.ListQueues, request, apb.ListQueuesResponse)).queues
        )

    async def pause_queue(self, queue: str) -> apb.QueueInfo:
        """No more of the queue's jobs start; running ones finish."""
        request = apb.PauseQueueRequest(queue=queue)
        return (await self._call(self._stub.PauseQueue, request, apb.PauseQueueResponse)).queue

    async def resume_queue(self, queue: str) -> apb.QueueInfo:
        """A paused queue's jobs are granted again."""
        request = apb.ResumeQueueRequest(queue=queue)
        return (await self._call(self._stub.ResumeQueue, request, apb.ResumeQueueResponse)).queue

    async def list_workers(self) -> list[apb.Worker]:
        """The workers connected now, by worker id, with what each runs."""
        request = apb.ListWorkersRequest()
        return list(
            (await self._call(self._stub.ListWorkers, request, apb.ListWorkersResponse)).workers
        )

    async def count_jobs(
        self, since: datetime, until: datetime | None = None
    ) -> apb.CountJobsResponse:
        """Exact counts of every user's jobs by status over [since, until) (None: now):
        created in it, finished in it, and every unfinished job now."""
        request = apb.CountJobsRequest()
        request.since.FromDatetime(since)
        if until is not None:
            request.until.FromDatetime(until)
        return await self._call(self._stub.CountJobs, request, apb.CountJobsResponse)

    async def open_console_session(
        self, *, idle_timeout: timedelta | None = None, max_age: timedelta | None = None
    ) -> apb.OpenConsoleSessionResponse:
        """A web console session for this client's principal (its id is a secret)."""
        request = apb.OpenConsoleSessionRequest()
        if idle_timeout is not None:
            request.idle_timeout.FromTimedelta(idle_timeout)
        if max_age is not None:
            request.max_age.FromTimedelta(max_age)
        return await self._call(
            self._stub.OpenConsoleSession,
            request,
            apb.OpenConsoleSessionResponse,
            replay_safe=False,
        )

    async def check_console_session(self, session_id: str) -> apb.CheckConsoleSessionResponse:
        """The live session (kept alive by this call); Unauthenticated once it has ended."""
        request = apb.CheckConsoleSessionRequest(session_id=session_id)
        return await self._call(
            self._stub.CheckConsoleSession, request, apb.CheckConsoleSessionResponse
        )

    async def close_console_session(self, session_id: str) -> None:
        request = apb.CloseConsoleSessionRequest(session_id=session_id)
        await self._call(self._stub.CloseConsoleSession, request, apb.CloseConsoleSessionResponse)

    async def revoke_console_sessions(self, principal: str) -> int:
        """Ends every open console session of ``principal``; how many there were."""
        request = apb.RevokeConsoleSessionsRequest(principal=principal)
        answer = await self._call(
            self._stub.RevokeConsoleSessions, request, apb.RevokeConsoleSessionsResponse
        )
        return answer.revoked

    async def erase_user_data(
        self, user_id: str, *, dry_run: bool = False, cancel_running: bool = False
    ) -> apb.EraseUserDataResponse:
        """Erases the user's data for good (their data key destroyed, their jobs, schedules
        and stored keys deleted), or with ``dry_run`` counts what would go. Refused
        (UserHasRunningJobs) while their jobs have not ended; ``cancel_running`` cancels
        them first (call again once they have ended). Idempotent."""
        request = apb.EraseUserDataRequest(
            user_id=user_id, dry_run=dry_run, cancel_running=cancel_running
        )
        return await self._call(self._stub.EraseUserData, request, apb.EraseUserDataResponse)

    async def list_rate_limits(self) -> list[apb.RateLimitInfo]:
        """The fleet-wide provider rate limits per model tier."""
        request = apb.ListRateLimitsRequest()
        response = await self._call(self._stub.ListRateLimits, request, apb.ListRateLimitsResponse)
        return list(response.limits)
