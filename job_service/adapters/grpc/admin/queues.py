"""Queues and the rate limits their jobs share: pause, resume, list, and the buckets'
state."""

from __future__ import annotations

import logging

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers
from job_service.domain.queues import QueueState
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.pbconv import timestamp

log = logging.getLogger(__name__)


class QueueHandlers(AdminHandlers):
    async def PauseQueue(
        self, request: pb.PauseQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.PauseQueueResponse:
        principal = self._tokens.caller(context.invocation_metadata())
        state = await self._queues.pause(request.queue, principal)
        log.info("queue %s paused by %s", request.queue, principal)
        return pb.PauseQueueResponse(queue=_queue_to_pb(state))

    async def ResumeQueue(
        self, request: pb.ResumeQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResumeQueueResponse:
        state = await self._queues.resume(request.queue)
        log.info(
            "queue %s resumed by %s",
            request.queue,
            self._tokens.caller(context.invocation_metadata()),
        )
        return pb.ResumeQueueResponse(queue=_queue_to_pb(state))

    async def ListQueues(
        self, request: pb.ListQueuesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListQueuesResponse:
        return pb.ListQueuesResponse(queues=[_queue_to_pb(q) for q in await self._queues.states()])

    async def ListRateLimits(
        self, request: pb.ListRateLimitsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListRateLimitsResponse:
        return pb.ListRateLimitsResponse(
            limits=[
                pb.RateLimitInfo(
                    key=b.limit.key,
                    requests_per_minute=b.limit.requests_per_minute,
                    tokens_per_minute=b.limit.tokens_per_minute,
                    effective_factor=b.factor,
                    requests_available=b.requests_available,
                    tokens_available=b.tokens_available,
                    blocked_until=timestamp(b.blocked_until),
                    waiting=b.waiting,
                    throttled_total=b.throttled_total,
                )
                for b in await self._queues.rate_limits()
            ]
        )


def _queue_to_pb(state: QueueState) -> pb.QueueInfo:
    return pb.QueueInfo(
        name=state.name,
        paused=state.paused,
        paused_at=timestamp(state.paused_at),
        paused_by=state.paused_by or "",
        waiting=state.waiting,
        eligible=state.eligible,
        running=state.running,
        concurrency_limit=state.concurrency_limit,
    )
