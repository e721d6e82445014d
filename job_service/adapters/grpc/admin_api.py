"""AdminService: operators' reads and actions across every user. Answers carry the
internal error message (``job_to_pb(..., internal=True)``); the role check is the auth
interceptor's."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import grpc

from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.convert import STATUS_TO_PB, job_to_pb
from job_service.domain.checks import id_suffix
from job_service.domain.lifecycle import ACTIVE, TERMINAL, JobStatus
from job_service.domain.queues import QueueState
from job_service.domain.selection import JobFilter, JobSelection
from job_service.usecases.admin import Admin, attribution
from job_service.usecases.bulk import BulkActions, BulkRequest
from job_service.usecases.console_sessions import ConsoleSessions
from job_service.usecases.outbox import OutboxUpkeep
from job_service.usecases.queues import Queues
from shared.errors import FieldViolation, InvalidInput
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.pb.jobs.v1 import admin_service_pb2_grpc
from shared.pbconv import timestamp
from shared.registry import Registry
from shared.rpc_errors import status_proto_for

log = logging.getLogger(__name__)
ADMIN_DOMAIN = pb.DESCRIPTOR.services_by_name["AdminService"].full_name
PB_TO_STATUS = {number: status for status, number in STATUS_TO_PB.items()}


class AdminServicer(admin_service_pb2_grpc.AdminServiceServicer):
    def __init__(
        self,
        admin: Admin,
        outbox: OutboxUpkeep,
        queues: Queues,
        registry: Registry,
        tokens: TokenTable,
        bulk: BulkActions,
        console_sessions: ConsoleSessions,
        *,
        job_retention_s: float = 0.0,
    ) -> None:
        self._console_sessions = console_sessions
        self._job_retention_s = job_retention_s
        self._bulk = bulk
        self._admin = admin
        self._outbox = outbox
        self._queues = queues
        self._registry = registry
        self._tokens = tokens

    async def ListJobs(
        self, request: pb.AdminListJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AdminListJobsResponse:
        where = JobFilter(
            user_id=request.user_id or None,
            job_type=request.job_type or None,
            status=_status(request.status),
            queue=request.queue or None,
            created_after=_time(request, "created_after"),
            created_before=_time(request, "created_before"),
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

    async def ListJobDefinitions(
        self, request: pb.ListJobDefinitionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobDefinitionsResponse:
        return pb.ListJobDefinitionsResponse(
            definitions=[
                pb.JobDefinitionInfo(
                    job_type=d.job_type,
                    label=d.label,
                    domain=d.domain,
                    version=d.version,
                    queue=d.queue,
                    default_priority=d.default_priority,
                    timeout_seconds=d.timeout_s,
                    max_attempts=d.max_attempts,
                    max_concurrency=d.concurrency,
                    fairness_key=d.fairness_key,
                    concurrency_key=d.concurrency_key,
                    concurrency_limit=d.concurrency_limit,
                    estimated_tokens=d.estimated_tokens,
                    input_schema_json=json.dumps(d.input_model.model_json_schema()),
                    output_schema_json=json.dumps(d.output_model.model_json_schema()),
                    output_redaction=sorted(d.output_redaction),
                    redaction_version=d.redaction_version,
                    content_safety_check=d.content_safety_check,
                    retention_seconds=(
                        self._job_retention_s if d.retention_s is None else d.retention_s
                    ),
                )
                for d in sorted(self._registry, key=lambda d: d.job_type)
            ]
        )

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

    async def ListWorkers(
        self, request: pb.ListWorkersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkersResponse:
        return pb.ListWorkersResponse(
            workers=[
                pb.Worker(
                    worker_id=w.worker_id,
                    connected_at=timestamp(w.connected_at),
                    definitions=w.definitions,
                    running_jobs=w.running_jobs,
                )
                for w in await self._admin.live_workers()
            ]
        )

    async def CountJobs(
        self, request: pb.CountJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CountJobsResponse:
        counts = await self._admin.count_jobs(_time(request, "since"), _time(request, "until"))

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

    async def OpenConsoleSession(
        self, request: pb.OpenConsoleSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.OpenConsoleSessionResponse:
        opened = await self._console_sessions.open(
            self._tokens.caller(context.invocation_metadata()),
            request.idle_timeout.ToTimedelta(),
            request.max_age.ToTimedelta(),
        )
        return pb.OpenConsoleSessionResponse(
            session_id=opened.secret,
            principal=opened.principal,
            expires_at=timestamp(opened.expires_at),
        )

    async def CheckConsoleSession(
        self, request: pb.CheckConsoleSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckConsoleSessionResponse:
        live = await self._console_sessions.check(
            request.session_id, self._tokens.caller(context.invocation_metadata())
        )
        return pb.CheckConsoleSessionResponse(
            principal=live.principal, expires_at=timestamp(live.expires_at)
        )

    async def CloseConsoleSession(
        self, request: pb.CloseConsoleSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.CloseConsoleSessionResponse:
        await self._console_sessions.close(
            request.session_id, self._tokens.caller(context.invocation_metadata())
        )
        return pb.CloseConsoleSessionResponse()

    async def RevokeConsoleSessions(
        self, request: pb.RevokeConsoleSessionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeConsoleSessionsResponse:
        revoked = await self._console_sessions.revoke(
            request.principal, self._tokens.caller(context.invocation_metadata())
        )
        return pb.RevokeConsoleSessionsResponse(revoked=revoked)

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
            status=_status(s.status, "selection.status"),
            queue=s.queue or None,
            created_after=_time(s, "created_after", "selection."),
            created_before=_time(s, "created_before", "selection."),
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


def _status(number: int, field: str = "status") -> JobStatus | None:
    if number == 0:
        return None
    try:
        return PB_TO_STATUS[number]
    except KeyError:
        raise InvalidInput(
            f"{field} is not a known job status",
            [FieldViolation(field, "a JobStatus value, or unset")],
        ) from None


def _time(
    request: pb.AdminListJobsRequest | pb.JobSelection | pb.CountJobsRequest,
    name: str,
    prefix: str = "",
) -> datetime | None:
    if not request.HasField(name):
        return None
    try:
        return getattr(request, name).ToDatetime(tzinfo=UTC)  # type: ignore[no-any-return]
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"{prefix}{name} is out of range",
            [FieldViolation(prefix + name, "a timestamp between years 1 and 9999")],
        ) from None
