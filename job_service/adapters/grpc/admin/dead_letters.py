"""Dead letters: the jobs that failed for good and the outbox events that could not be
published, and publishing those again."""

from __future__ import annotations

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers
from job_service.adapters.grpc.convert import job_to_pb
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.pbconv import timestamp


class DeadLetterHandlers(AdminHandlers):
    async def ListDeadLetters(
        self, request: pb.ListDeadLettersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDeadLettersResponse:
        failed, events, token = await self._admin.dead_letters(
            request.page_size, request.page_token
        )
        return pb.ListDeadLettersResponse(
            failed_jobs=[job_to_pb(j, internal=True) for j in failed],
            dead_events=[
                pb.DeadOutboxEvent(
                    id=e.id,
                    job_id=e.job_id,
                    subject=e.subject,
                    attempts=e.attempts,
                    last_error=e.last_error or "",
                    created_at=timestamp(e.created_at),
                )
                for e in events
            ],
            next_page_token=token,
        )

    async def RedriveDeadLetters(
        self, request: pb.RedriveDeadLettersRequest, context: grpc.aio.ServicerContext
    ) -> pb.RedriveDeadLettersResponse:
        count = await self._outbox.redrive(list(request.event_ids))
        return pb.RedriveDeadLettersResponse(redriven=count)
