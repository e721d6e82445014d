"""Jobs across every user: list, read (with the hold a queue puts on it), retry and count.
Answers carry the internal error message (``job_to_pb(..., internal=True)``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers, status_from_pb
from job_service.adapters.grpc.convert import STATUS_TO_PB, instant_from_pb, job_to_pb
from job_service.domain.checks import id_suffix
from job_service.domain.lifecycle import ACTIVE, TERMINAL, JobStatus
from job_service.domain.selection import JobFilter
from job_service.usecases.admin import attribution
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.pbconv import timestamp


class JobHandlers(AdminHandlers):
    async def ListJobs(
        self, request: pb.AdminListJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AdminListJobsResponse:
        where = JobFilter(
            user_id=request.user_id or None,
            job_type=request.job_type or None,
            status=status_from_pb(request.status),
            queue=request.queue or None,
            created_after=instant_from_pb(request, "created_after"),
            created_before=instant_from_pb(request, "created_before"),
            target_type=request.target_type or None,
            target_id=request.target_id or None,
            id_suffix=id_suffix(request.id_suffix),
        )
        jobs, token = await self._admin.list_jobs(where, request.page_size, request.page_token)
        return pb.AdminListJobsResponse(
            jobs=[job_to_pb(j, internal=True) for j in jobs], next_page_token=token
        )

    async def GetJob(
        self, request: pb.AdminGetJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.AdminGetJobResponse:
        job = await self._admin.get_any_job(request.job_id)
        if job.hold is None:  # a job waiting for its dependencies says so already
            job = replace(job, hold=await self._queues.hold(job))
        return pb.AdminGetJobResponse(job=job_to_pb(job, internal=True))

    async def RetryJob(
        self, request: pb.RetryJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetryJobResponse:
        principal = self._tokens.caller(context.invocation_metadata())
        job = await self._admin.retry_job(
            request.job_id, attribution(principal), idempotency_key=request.idempotency_key
        )
        return pb.RetryJobResponse(job=job_to_pb(job, internal=True))

    async def CountJobs(
        self, request: pb.CountJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CountJobsResponse:
        counts = await self._admin.count_jobs(
            instant_from_pb(request, "since"), instant_from_pb(request, "until")
        )

        def each(found: dict[JobStatus, int], statuses: Iterable[JobStatus]) -> list[Any]:
            return [
                pb.StatusCount(status=STATUS_TO_PB[s], count=found.get(s, 0))  # type: ignore[arg-type]
                for s in statuses
            ]

        return pb.CountJobsResponse(
            since=timestamp(counts.since),
            until=timestamp(counts.until),
            created=each(counts.created, JobStatus),
            finished=each(counts.finished, [s for s in JobStatus if s in TERMINAL]),
            unfinished=each(counts.unfinished, [s for s in JobStatus if s in ACTIVE]),
            delayed=counts.delayed,
        )
