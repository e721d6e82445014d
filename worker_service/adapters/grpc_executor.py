"""ExecutorApi over gRPC: the job service's ExecutorService on one shared aio channel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import executor_service_pb2_grpc, job_pb2
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import ArtifactDraft
from shared.rpc_errors import error_from_rpc
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable
from worker_service.domain.model import HeartbeatReply, LockedJob, LockOutcome, LockResult

# Failures that say nothing about the call but that it did not get through (or its answer
# did not get back): retrying is safe, every executor call being fenced by its lease token.
TRANSIENT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)

CHANNEL_OPTIONS = (
    # Inputs and outputs travel as Structs; allow more than gRPC's default 4 MiB.
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
)

_OUTCOMES = {
    pb.LOCK_OUTCOME_LOCKED: LockOutcome.LOCKED,
    pb.LOCK_OUTCOME_NOT_DUE: LockOutcome.NOT_DUE,
    pb.LOCK_OUTCOME_UNAVAILABLE: LockOutcome.UNAVAILABLE,
}
_STATUS_PREFIX = "JOB_STATUS_"


def open_channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)


class GrpcExecutorClient:
    """Translates every failed call into ``shared.errors`` (when the job service said why)
    or ``ExecutorUnreachable`` / ``ExecutorCallFailed`` (when it did not)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = executor_service_pb2_grpc.ExecutorServiceStub(channel)  # type: ignore[no-untyped-call]

    async def lock_job(self, job_id: str, worker_id: str, *, timeout_s: float) -> LockResult:
        request = pb.LockJobRequest(job_id=job_id, worker_id=worker_id)
        try:
            response = await self._stub.LockJob(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        outcome = _OUTCOMES.get(response.outcome)
        if outcome is None:
            raise ExecutorCallFailed(f"LockJob answered outcome {response.outcome}")
        if outcome is LockOutcome.LOCKED:
            return LockResult(outcome, job=_locked_job(response.job))
        if outcome is LockOutcome.NOT_DUE:
            retry_after = (
                response.retry_after.ToNanoseconds() / 1e9
                if response.HasField("retry_after")
                else None
            )
            return LockResult(outcome, retry_after=retry_after)
        return LockResult(outcome)

    async def heartbeat(
        self, job_id: str, lease_token: str, progress: float, *, timeout_s: float
    ) -> HeartbeatReply:
        request = pb.HeartbeatRequest(job_id=job_id, lease_token=lease_token, progress=progress)
        try:
            response = await self._stub.Heartbeat(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        return HeartbeatReply(cancel_requested=response.cancel_requested)

    async def submit_result(
        self,
        job_id: str,
        lease_token: str,
        output: dict[str, Any],
        output_hash: str,
        artifacts: Sequence[ArtifactDraft],
        *,
        timeout_s: float,
    ) -> str:
        request = pb.SubmitResultRequest(
            job_id=job_id,
            lease_token=lease_token,
            output=struct_from_dict(output),
            output_hash=output_hash,
            artifacts=[
                job_pb2.Artifact(
                    artifact_type=a.artifact_type,
                    artifact_id=a.artifact_id,
                    ordinal=a.ordinal,
                    payload=struct_from_dict(a.payload),
                )
                for a in artifacts
            ],
        )
        try:
            response = await self._stub.SubmitResult(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        return _status_name(response.status)

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        *,
        timeout_s: float,
    ) -> str:
        request = pb.SubmitFailureRequest(
            job_id=job_id,
            lease_token=lease_token,
            error_code=error_code,
            error_message=error_message,
        )
        try:
            response = await self._stub.SubmitFailure(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        return _status_name(response.status)


def _locked_job(job: pb.LockedJob) -> LockedJob:
    return LockedJob(
        job_id=job.job_id,
        job_type=job.job_type,
        lease_token=job.lease_token,
        attempt=job.attempt,
        input=dict_from_struct(job.input),
        lease_ttl_ms=job.lease_ttl_ms,
        heartbeat_interval_ms=job.heartbeat_interval_ms,
    )


def _status_name(status: int) -> str:
    try:
        name: str = job_pb2.JobStatus.Name(status)
        return name.removeprefix(_STATUS_PREFIX)
    except ValueError:
        return str(status)


def _translate(exc: grpc.aio.AioRpcError) -> Exception:
    try:
        error = error_from_rpc(exc)
    except ValueError:  # a status detail inconsistent with the call's status: ignore it
        error = None
    if error is not None:
        return error
    if exc.code() in TRANSIENT_CODES:
        return ExecutorUnreachable(f"{exc.code().name}: {exc.details()}")
    return ExecutorCallFailed(f"{exc.code().name}: {exc.details()}")
