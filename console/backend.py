"""job_service as the console sees it: the AdminService and JobService stubs on one channel,
each call made with the signed-in user's token.

One channel serves every session (the token travels as call metadata, not as channel
credentials), so a page costs no new connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from shared.grpc_client import ChannelConfig, aio_channel
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import admin_service_pb2_grpc as agrpc
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc as jgrpc
from shared.rpc_errors import error_from_rpc

CALL_TIMEOUT_S = 10.0
# A refused token: the session is over.
SIGNED_OUT_CODES = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


def describe(error: grpc.aio.AioRpcError) -> str:
    """What to tell the user about a failed call (the service's own message)."""
    known = error_from_rpc(error)
    return str(known) if known is not None else (error.details() or error.code().name)


def _timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


class Backend:
    def __init__(self, config: ChannelConfig) -> None:
        self._channel = aio_channel(config)
        self._admin = agrpc.AdminServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._jobs = jgrpc.JobServiceStub(self._channel)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        await self._channel.close()

    @staticmethod
    def _auth(token: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {token}"),)

    async def definitions(self, token: str) -> list[apb.JobDefinitionInfo]:
        response = await self._admin.ListJobDefinitions(
            apb.ListJobDefinitionsRequest(), metadata=self._auth(token), timeout=CALL_TIMEOUT_S
        )
        return list(response.definitions)

    async def list_jobs(
        self,
        token: str,
        *,
        job_type: str = "",
        status: int = 0,
        queue: str = "",
        user_id: str = "",
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        page_size: int = 50,
        page_token: str = "",
    ) -> apb.AdminListJobsResponse:
        request = apb.AdminListJobsRequest(
            job_type=job_type,
            status=status,  # type: ignore[arg-type]
            queue=queue,
            user_id=user_id,
            created_after=_timestamp(created_after),
            created_before=_timestamp(created_before),
            page_size=page_size,
            page_token=page_token,
        )
        response: apb.AdminListJobsResponse = await self._admin.ListJobs(
            request, metadata=self._auth(token), timeout=CALL_TIMEOUT_S
        )
        return response

    async def job(self, token: str, job_id: str) -> job_pb2.Job:
        response = await self._admin.GetJob(
            apb.AdminGetJobRequest(job_id=job_id),
            metadata=self._auth(token),
            timeout=CALL_TIMEOUT_S,
        )
        job: job_pb2.Job = response.job
        return job

    async def cancel(self, token: str, job: job_pb2.Job) -> job_pb2.Job:
        # The admin role may act for any user through JobService.
        response = await self._jobs.CancelJob(
            jpb.CancelJobRequest(job_id=job.id, user_id=job.user_id),
            metadata=self._auth(token),
            timeout=CALL_TIMEOUT_S,
        )
        cancelled: job_pb2.Job = response.job
        return cancelled

    async def retry(self, token: str, job_id: str) -> job_pb2.Job:
        response = await self._admin.RetryJob(
            apb.RetryJobRequest(job_id=job_id), metadata=self._auth(token), timeout=CALL_TIMEOUT_S
        )
        new: job_pb2.Job = response.job
        return new

    async def dead_letters(
        self, token: str, page_size: int = 50, page_token: str = ""
    ) -> apb.ListDeadLettersResponse:
        response: apb.ListDeadLettersResponse = await self._admin.ListDeadLetters(
            apb.ListDeadLettersRequest(page_size=page_size, page_token=page_token),
            metadata=self._auth(token),
            timeout=CALL_TIMEOUT_S,
        )
        return response

    async def redrive(self, token: str, event_ids: list[int]) -> int:
        response = await self._admin.RedriveDeadLetters(
            apb.RedriveDeadLettersRequest(event_ids=event_ids),
            metadata=self._auth(token),
            timeout=CALL_TIMEOUT_S,
        )
        return int(response.redriven)

    async def queues(self, token: str) -> list[apb.QueueInfo]:
        response = await self._admin.ListQueues(
            apb.ListQueuesRequest(), metadata=self._auth(token), timeout=CALL_TIMEOUT_S
        )
        return list(response.queues)

    async def pause(self, token: str, queue: str) -> apb.QueueInfo:
        response = await self._admin.PauseQueue(
            apb.PauseQueueRequest(queue=queue), metadata=self._auth(token), timeout=CALL_TIMEOUT_S
        )
        info: apb.QueueInfo = response.queue
        return info

    async def resume(self, token: str, queue: str) -> apb.QueueInfo:
        response = await self._admin.ResumeQueue(
            apb.ResumeQueueRequest(queue=queue), metadata=self._auth(token), timeout=CALL_TIMEOUT_S
        )
        info: apb.QueueInfo = response.queue
        return info

    async def rate_limits(self, token: str) -> list[apb.RateLimitInfo]:
        response = await self._admin.ListRateLimits(
            apb.ListRateLimitsRequest(), metadata=self._auth(token), timeout=CALL_TIMEOUT_S
        )
        return list(response.limits)

    async def watch(self, token: str, job: job_pb2.Job) -> AsyncIterator[job_pb2.Job]:
        """The job's state now, then each change, until it ends (WatchJob)."""
        call = self._jobs.WatchJob(
            jpb.WatchJobRequest(job_id=job.id, user_id=job.user_id), metadata=self._auth(token)
        )
        try:
            async for response in call:
                yield response.job
        finally:
            call.cancel()
