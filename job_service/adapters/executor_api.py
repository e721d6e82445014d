"""ExecutorService: what workers call. Every call after LockJob is fenced by the lease
token; the engine and repository refuse stale ones with LEASE_LOST."""

from __future__ import annotations

import grpc

from job_service.adapters.convert import STATUS_TO_PB
from job_service.domain.models import LockGrant
from job_service.engine import JobEngine
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import executor_service_pb2_grpc
from shared.pbconv import dict_from_struct, struct_from_dict, timestamp
from shared.registry import ArtifactDraft


class ExecutorServicer(executor_service_pb2_grpc.ExecutorServiceServicer):
    def __init__(self, engine: JobEngine, *, lease_ttl_s: float, heartbeat_interval_s: float):
        self._engine = engine
        self._lease_ttl_ms = int(lease_ttl_s * 1000)
        self._heartbeat_interval_ms = int(heartbeat_interval_s * 1000)

    async def LockJob(
        self, request: pb.LockJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.LockJobResponse:
        result = await self._engine.lock_job(request.job_id, request.worker_id)
        if isinstance(result, LockGrant):
            return pb.LockJobResponse(
                outcome=pb.LOCK_OUTCOME_LOCKED,
                job=pb.LockedJob(
                    job_id=result.job_id,
                    job_type=result.job_type,
                    lease_token=result.lease_token,
                    attempt=result.attempt,
                    input=struct_from_dict(result.input),
                    lease_expires_at=timestamp(result.lease_expires_at),
                    lease_ttl_ms=self._lease_ttl_ms,
                    heartbeat_interval_ms=self._heartbeat_interval_ms,
                ),
            )
        if result.retry_after is not None:
            return pb.LockJobResponse(
                outcome=pb.LOCK_OUTCOME_NOT_DUE, retry_after=timestamp(result.retry_after)
            )
        return pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_UNAVAILABLE)

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatResponse:
        ack = await self._engine.heartbeat(request.job_id, request.lease_token, request.progress)
        return pb.HeartbeatResponse(
            lease_expires_at=timestamp(ack.lease_expires_at),
            cancel_requested=ack.cancel_requested,
        )

    async def SubmitResult(
        self, request: pb.SubmitResultRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitResultResponse:
        status = await self._engine.submit_result(
            request.job_id,
            request.lease_token,
            dict_from_struct(request.output),
            request.output_hash,
            [
                ArtifactDraft(
                    artifact_type=a.artifact_type,
                    artifact_id=a.artifact_id,
                    ordinal=a.ordinal,
                    payload=dict_from_struct(a.payload),
                )
                for a in request.artifacts
            ],
        )
        return pb.SubmitResultResponse(status=STATUS_TO_PB[status])  # type: ignore[arg-type]

    async def SubmitFailure(
        self, request: pb.SubmitFailureRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitFailureResponse:
        outcome = await self._engine.submit_failure(
            request.job_id, request.lease_token, request.error_code, request.error_message
        )
        return pb.SubmitFailureResponse(
            status=STATUS_TO_PB[outcome.status],  # type: ignore[arg-type]
            next_run_at=timestamp(outcome.next_run_at),
        )
