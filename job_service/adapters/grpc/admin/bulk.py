"""Bulk actions: cancel or retry every job a selection matches, a page at a time (or a dry
run that only counts)."""

from __future__ import annotations

import grpc

from job_service.adapters.grpc.admin.base import ADMIN_DOMAIN, AdminHandlers, status_from_pb
from job_service.adapters.grpc.convert import instant_from_pb
from job_service.domain.selection import JobFilter, JobSelection
from job_service.usecases.bulk import BulkRequest
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.rpc_errors import status_proto_for


class BulkHandlers(AdminHandlers):
    async def CancelJobs(
        self, request: pb.CancelJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelJobsResponse:
        page = await self._bulk.cancel_jobs(self._bulk_request(request, context))
        return pb.CancelJobsResponse(
            cancelled=len(page.cancelled),
            skipped=page.skipped,
            matched=page.matched,
            job_ids=page.cancelled,
            next_page_token=page.next_page_token,
        )

    async def RetryJobs(
        self, request: pb.RetryJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetryJobsResponse:
        page = await self._bulk.retry_jobs(self._bulk_request(request, context))
        return pb.RetryJobsResponse(
            retried=page.retried,
            matched=page.matched,
            outcomes=[
                pb.RetryJobOutcome(
                    job_id=o.job_id,
                    new_job_id=o.new_job_id,
                    status=None
                    if o.error is None
                    else status_proto_for(o.error, ADMIN_DOMAIN, {"job_id": o.job_id}),
                )
                for o in page.outcomes
            ],
            next_page_token=page.next_page_token,
        )

    def _bulk_request(
        self,
        request: pb.CancelJobsRequest | pb.RetryJobsRequest,
        context: grpc.aio.ServicerContext,
    ) -> BulkRequest:
        s = request.selection
        where = JobFilter(
            user_id=s.user_id or None,
            job_type=s.job_type or None,
            status=status_from_pb(s.status, "selection.status"),
            queue=s.queue or None,
            created_after=instant_from_pb(s, "created_after", "selection."),
            created_before=instant_from_pb(s, "created_before", "selection."),
            target_type=s.target_type or None,
            target_id=s.target_id or None,
        )
        return BulkRequest(
            selection=JobSelection(where, tuple(s.job_ids)),
            principal=self._tokens.caller(context.invocation_metadata()),
            dry_run=request.dry_run,
            limit=request.limit,
            page_token=request.page_token,
            reason=request.reason,
        )
