"""ExecutorService: what workers call. Every call after LockJob is fenced by the lease
token; the leases and results use cases refuse stale ones with LEASE_LOST. The per-job and batch
forms of LockJob and SubmitResult share one path: a single call is a batch of one."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import grpc

from job_service.adapters.grpc.convert import (
    CREDENTIAL_MODE_TO_PB,
    STATUS_TO_PB,
    dependency_policy_from_pb,
)
from job_service.adapters.grpc.session_api import serve_session
from job_service.domain.attempts import Submission
from job_service.domain.grants import LockGrant, LockRefusal
from job_service.domain.lifecycle import JobStatus
from job_service.usecases.call_permits import CallPermits
from job_service.usecases.credentials import CredentialVault
from job_service.usecases.dependencies import DependencyResults
from job_service.usecases.grants import Grants
from job_service.usecases.job_types import DeclaredJobTypes
from job_service.usecases.leases import Leases
from job_service.usecases.results import Results
from job_service.usecases.sessions import WorkerSessions
from job_service.usecases.signals import Signals
from job_service.usecases.steps import Steps
from shared.ai.steps import MAX_RESPONSE_CHARS
from shared.dependencies import DependencyPolicy
from shared.errors import FieldViolation, InvalidInput, JobsError
from shared.execution import ChildJobDraft
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import executor_service_pb2_grpc
from shared.pbconv import (
    artifact_from_pb,
    dict_from_struct,
    recorded_step_to_pb,
    step_response_from_pb,
    step_result_from_pb,
    step_result_to_pb,
    struct_from_dict,
    timestamp,
    usage_from_pb,
)
from shared.rpc_errors import status_proto_for

# The ErrorInfo domain of a refused SubmitResults item (the interceptor's, for one call).
EXECUTOR_DOMAIN = pb.DESCRIPTOR.services_by_name["ExecutorService"].full_name


class ExecutorServicer(executor_service_pb2_grpc.ExecutorServiceServicer):
    def __init__(
        self,
        leases: Leases,
        results: Results,
        grants: Grants,
        vault: CredentialVault,
        *,
        lease_ttl_s: float,
        heartbeat_interval_s: float,
        sessions: WorkerSessions,
        steps: Steps,
        signals: Signals,
        permits: CallPermits,
        dependencies: DependencyResults,
        declared: DeclaredJobTypes,
    ):
        self._declared = declared
        self._dependencies = dependencies
        self._permits = permits
        self._signals = signals
        self._leases = leases
        self._results = results
        self._grants = grants
        self._vault = vault
        self._sessions = sessions
        self._steps = steps
        self._lease_ttl_ms = int(lease_ttl_s * 1000)
        self._heartbeat_interval_ms = int(heartbeat_interval_s * 1000)

    async def DeclareJobType(
        self, request: pb.DeclareJobTypeRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeclareJobTypeResponse:
        declaration = await self._declared.declare(request.worker_id, request.spec)
        answer = pb.DeclareJobTypeResponse(first_declared_by=declaration.first_declared_by)
        answer.first_declared_at.FromDatetime(declaration.first_declared_at)
        return answer

    async def LockJob(
        self, request: pb.LockJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.LockJobResponse:
        [answer] = await self._grants.for_tokens(
            [request.job_id], request.worker_id, runnable=list(request.runnable_definitions)
        )
        return self._lock_response(answer)

    async def LockJobs(
        self, request: pb.LockJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.LockJobsResponse:
        # a batch is one worker's fetch: one worker id for all of it
        worker_ids = {r.worker_id for r in request.requests}
        if len(worker_ids) > 1:
            raise InvalidInput(
                "one LockJobs call locks for one worker",
                [FieldViolation("requests.worker_id", "the same in every request")],
            )
        worker_id = worker_ids.pop() if worker_ids else ""
        answers = await self._grants.for_tokens(
            [r.job_id for r in request.requests],
            worker_id,
            queue=request.queue,
            runnable=list(request.runnable_definitions),
        )
        return pb.LockJobsResponse(responses=[self._lock_response(a) for a in answers])

    def _lock_response(self, answer: LockGrant | LockRefusal) -> pb.LockJobResponse:
        if isinstance(answer, LockGrant):
            return pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_LOCKED, job=self._locked_job(answer))
        if answer.retry_after is not None:
            return pb.LockJobResponse(
                outcome=pb.LOCK_OUTCOME_NOT_DUE, retry_after=timestamp(answer.retry_after)
            )
        return pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_UNAVAILABLE)

    def _locked_job(self, grant: LockGrant) -> pb.LockedJob:
        return pb.LockedJob(
            job_id=grant.job_id,
            job_type=grant.job_type,
            lease_token=grant.lease_token,
            attempt=grant.attempt,
            input=struct_from_dict(grant.input),
            lease_expires_at=timestamp(grant.lease_expires_at),
            lease_ttl_ms=self._lease_ttl_ms,
            heartbeat_interval_ms=self._heartbeat_interval_ms,
            user_id=grant.user_id,
            prompt_key=grant.prompt_key,
            prompt_version=grant.prompt_version,
            credential_mode=CREDENTIAL_MODE_TO_PB[grant.credential_mode],  # type: ignore[arg-type]
            credential_id=grant.credential_id or "",
            recorded_steps=[recorded_step_to_pb(s) for s in grant.recorded_steps],
            step_results=[step_result_to_pb(r) for r in grant.step_results],
            dependency_count=grant.dependency_count,
        )

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatResponse:
        ack = await self._leases.heartbeat(request.job_id, request.lease_token, request.progress)
        return pb.HeartbeatResponse(
            lease_expires_at=timestamp(ack.lease_expires_at),
            cancel_requested=ack.cancel_requested,
            latest_signal_seq=ack.latest_signal_seq,
        )

    async def SubmitResult(
        self, request: pb.SubmitResultRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitResultResponse:
        [answer] = await self._results.submit_results([_submission(request)])
        if isinstance(answer, JobsError):
            raise answer
        return pb.SubmitResultResponse(status=STATUS_TO_PB[answer])  # type: ignore[arg-type]

    async def SubmitResults(
        self, request: pb.SubmitResultsRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitResultsResponse:
        submissions = [_submission(r) for r in request.requests]
        wanted = {w.queue: w.slots for w in request.next_grants}
        runnable = list(request.runnable_definitions)
        # bad next_grants are refused before any result is committed
        self._grants.check_wanted(wanted, request.worker_id, runnable)
        answers = await self._results.submit_results(submissions)
        # lock on submit (ADR 0009): the results stand whatever the grants do
        grants = await self._grants.with_results(wanted, request.worker_id, runnable)
        return pb.SubmitResultsResponse(
            outcomes=[
                pb.SubmitResultOutcome(
                    error=status_proto_for(a, EXECUTOR_DOMAIN, {"job_id": s.job_id})
                )
                if isinstance(a, JobsError)
                else pb.SubmitResultOutcome(status=STATUS_TO_PB[a])  # type: ignore[arg-type]
                for s, a in zip(submissions, answers, strict=True)
            ],
            grants=[self._locked_job(g) for g in grants],
        )

    async def SubmitFailure(
        self, request: pb.SubmitFailureRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitFailureResponse:
        outcome = await self._leases.submit_failure(
            request.job_id,
            request.lease_token,
            request.error_code,
            request.error_message,
            usage=[usage_from_pb(u) for u in request.usage],
            retry_after_s=request.retry_after_ms / 1000,
            signals_seen=request.signals_seen,
        )
        return pb.SubmitFailureResponse(
            status=STATUS_TO_PB[outcome.status],  # type: ignore[arg-type]
            next_run_at=timestamp(outcome.next_run_at),
        )

    async def ReportUsage(
        self, request: pb.ReportUsageRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportUsageResponse:
        attempt, stored = await self._leases.report_usage(
            request.job_id, request.lease_token, [usage_from_pb(u) for u in request.usage]
        )
        return pb.ReportUsageResponse(attempt=attempt, recorded=stored)

    async def RecordStep(
        self, request: pb.RecordStepRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordStepResponse:
        if len(request.response.parsed_json) > MAX_RESPONSE_CHARS:
            raise InvalidInput(
                "response.parsed_json is too large",
                [
                    FieldViolation(
                        "response.parsed_json", f"at most {MAX_RESPONSE_CHARS} characters"
                    )
                ],
            )
        try:
            response = step_response_from_pb(request.response)
        except (ValueError, RecursionError):
            raise InvalidInput(
                "response.parsed_json is not a JSON object",
                [FieldViolation("response.parsed_json", "a JSON object, or empty")],
            ) from None
        attempt = await self._steps.record(
            request.job_id,
            request.lease_token,
            request.step,
            response,
            usage_from_pb(request.usage),
        )
        return pb.RecordStepResponse(attempt=attempt)

    async def RecordStepResult(
        self, request: pb.RecordStepResultRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordStepResultResponse:
        step = step_result_from_pb(request.ordinal, request.name, request.outcome)
        recorded, stored = await self._steps.results.record(
            request.job_id, request.lease_token, step
        )
        return pb.RecordStepResultResponse(
            recorded=recorded, stored=None if stored is None else step_result_to_pb(stored)
        )

    async def ResolveCredential(
        self, request: pb.ResolveCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResolveCredentialResponse:
        resolved = await self._vault.resolve(request.job_id, request.lease_token)
        return pb.ResolveCredentialResponse(
            api_key=resolved.api_key,
            provider=resolved.provider,
            credential_id=resolved.credential_id,
        )

    async def AcquireCallPermit(
        self, request: pb.AcquireCallPermitRequest, context: grpc.aio.ServicerContext
    ) -> pb.AcquireCallPermitResponse:
        permit = await self._permits.acquire(
            request.job_id, request.lease_token, request.model_tier, request.reserved_slot
        )
        return pb.AcquireCallPermitResponse(
            granted=permit.granted,
            retry_after_ms=math.ceil(permit.retry_after_s * 1000),
            valid_for_ms=int(permit.valid_for_s * 1000),
            unlimited=permit.unlimited,
            reserved_slot=permit.reserved_slot,
            slot_at=timestamp(permit.slot_at),
        )

    async def ReportRateLimited(
        self, request: pb.ReportRateLimitedRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportRateLimitedResponse:
        blocked_until = await self._permits.rate_limited(
            request.job_id, request.lease_token, request.model_tier, request.retry_after_ms / 1000
        )
        return pb.ReportRateLimitedResponse(blocked_until=timestamp(blocked_until))

    async def WorkerSession(
        self,
        request_iterator: AsyncIterator[pb.WorkerSessionRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[pb.WorkerSessionResponse]:
        # the worker's liveness stream: session_api.py
        sessions = serve_session(
            self._sessions, self._grants, self._locked_job, request_iterator, context
        )
        async for response in sessions:
            yield response

    async def FetchSignals(
        self, request: pb.FetchSignalsRequest, context: grpc.aio.ServicerContext
    ) -> pb.FetchSignalsResponse:
        signals, more = await self._signals.fetch(
            request.job_id, request.lease_token, request.after_seq
        )
        return pb.FetchSignalsResponse(
            signals=[
                pb.JobSignal(
                    seq=s.seq,
                    name=s.name,
                    payload=struct_from_dict(s.payload),
                    sent_at=timestamp(s.sent_at),
                )
                for s in signals
            ],
            more=more,
        )

    async def FetchDependencyResults(
        self, request: pb.FetchDependencyResultsRequest, context: grpc.aio.ServicerContext
    ) -> pb.FetchDependencyResultsResponse:
        results, more = await self._dependencies.fetch(
            request.job_id, request.lease_token, request.after_job_id, request.page_size
        )
        return pb.FetchDependencyResultsResponse(
            results=[
                pb.DependencyResult(
                    job_id=r.job_id,
                    job_type=r.job_type,
                    status=STATUS_TO_PB[JobStatus(r.status)],  # type: ignore[arg-type]
                    output=struct_from_dict(r.output) if r.output is not None else None,
                    error_code=r.error_code or "",
                    target_type=r.target_type or "",
                    target_id=r.target_id or "",
                )
                for r in results
            ],
            more=more,
        )


def _submission(request: pb.SubmitResultRequest) -> Submission:
    return Submission(
        job_id=request.job_id,
        lease_token=request.lease_token,
        output=dict_from_struct(request.output),
        output_hash=request.output_hash,
        artifacts=[artifact_from_pb(a) for a in request.artifacts],
        children=[
            ChildJobDraft(
                job_type=c.job_type,
                input=dict_from_struct(c.input),
                idempotency_key=c.idempotency_key,
                priority=c.priority if c.HasField("priority") else None,
                depends_on_keys=tuple(c.depends_on_keys),
                dependency_policy=dependency_policy_from_pb(c.dependency_policy)
                or DependencyPolicy.FAIL,
            )
            for c in request.child_jobs
        ],
        usage=[usage_from_pb(u) for u in request.usage],
    )
