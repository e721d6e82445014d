"""ExecutorApi over gRPC: the job service's ExecutorService on one shared aio channel.

The messages and the failures are translated in ``executor_messages``; the WorkerSession
stream is held by ``grpc_session``; this module makes the calls, and splits a SubmitResults
batch into parts that every job service takes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC

import grpc

from shared.ai.provider import UsageRecord
from shared.ai.steps import StepResponse
from shared.dependencies import DependencyOutput
from shared.durable_steps import StepResult
from shared.grpc_client import ChannelConfig, aio_channel
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import executor_service_pb2_grpc
from shared.pbconv import dict_from_struct, step_response_to_pb, usage_to_pb
from worker_service.adapters.executor_messages import (
    dependency_output,
    error_from_call,
    lock_result,
    locked_job,
    result_answer,
    result_message,
    status_name,
    step_result_request,
    stored_step_result,
)
from worker_service.adapters.grpc_session import hold
from worker_service.domain.errors import ExecutorCallFailed
from worker_service.domain.model import (
    CallPermit,
    HeartbeatReply,
    LockedJob,
    LockResult,
    ResultSubmission,
    Signal,
    UserKey,
)
from worker_service.ports import MAX_BATCH, SlotReports

# A SubmitResults batch goes in concurrent parts under this size: a job service that keeps
# gRPC's default 4 MiB limit still takes every part, and a result too large on its own goes
# alone and fails alone, as a single SubmitResult would have.
MAX_CALL_BYTES = 3 * 1024 * 1024

# Message limits come from shared.grpc_client; a long-lived worker channel also pings, and
# gives a connection up when a ping goes unanswered KEEPALIVE_TIMEOUT_MS: calls stop going
# to a replica that is frozen or cut off (its connection still up) within 15 s, instead of
# the 30 s + gRPC's default 20 s. The job service accepts pings this often (its server's
# options).
KEEPALIVE_TIME_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 5_000
# A replica the channel could not reach (not yet started, restarting) is tried again at
# least every second, not on gRPC's default backoff (1 s growing to 2 min): when the
# replica the worker's session and heartbeats use dies, the others must already be in the
# rotation, or the worker's leases run out while a reconnect waits out its backoff (a
# worker started before the second replica listened lost its six leases this way).
INITIAL_RECONNECT_BACKOFF_MS = 100
MAX_RECONNECT_BACKOFF_MS = 1_000
CHANNEL_OPTIONS = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.initial_reconnect_backoff_ms", INITIAL_RECONNECT_BACKOFF_MS),
    ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
)


def open_channel(config: ChannelConfig) -> grpc.aio.Channel:
    """The worker's channel: its token (role ``worker``) and TLS from ``config``."""
    return aio_channel(config, options=CHANNEL_OPTIONS)


class GrpcExecutorClient:
    """Translates every failed call into ``shared.errors`` (when the job service said why)
    or ``ExecutorUnreachable`` / ``ExecutorCallFailed`` (when it did not)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = executor_service_pb2_grpc.ExecutorServiceStub(channel)  # type: ignore[no-untyped-call]

    async def lock_jobs(
        self,
        job_ids: Sequence[str],
        worker_id: str,
        *,
        timeout_s: float,
        queue: str = "",
        runnable: Sequence[str] = (),
    ) -> list[LockResult | Exception]:
        _check_batch(len(job_ids))
        request = pb.LockJobsRequest(
            requests=[pb.LockJobRequest(job_id=job_id, worker_id=worker_id) for job_id in job_ids],
            queue=queue,
            runnable_definitions=list(runnable),
        )
        try:
            response = await self._stub.LockJobs(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        if len(response.responses) != len(job_ids):
            raise ExecutorCallFailed(
                f"LockJobs answered {len(response.responses)} of {len(job_ids)} jobs"
            )
        return [lock_result(answer) for answer in response.responses]

    async def heartbeat(
        self, job_id: str, lease_token: str, progress: float, *, timeout_s: float
    ) -> HeartbeatReply:
        request = pb.HeartbeatRequest(job_id=job_id, lease_token=lease_token, progress=progress)
        try:
            response = await self._stub.Heartbeat(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return HeartbeatReply(
            cancel_requested=response.cancel_requested,
            latest_signal_seq=response.latest_signal_seq,
        )

    async def submit_results(
        self, submissions: Sequence[ResultSubmission], *, timeout_s: float
    ) -> list[str | Exception]:
        _check_batch(len(submissions))
        parts = _parts([result_message(s) for s in submissions])
        if len(parts) == 1:
            return await self._submit_results(parts[0], timeout_s)
        answered = await asyncio.gather(
            *(self._submit_results(part, timeout_s) for part in parts), return_exceptions=True
        )
        answers: list[str | Exception] = []
        for part, answer in zip(parts, answered, strict=True):
            if isinstance(answer, Exception):
                answers.extend([answer] * len(part))  # a failed part fails its items only
            elif isinstance(answer, BaseException):
                raise answer
            else:
                answers.extend(answer)
        return answers

    async def submit_results_and_lock(
        self,
        submissions: Sequence[ResultSubmission],
        *,
        timeout_s: float,
        wanted: Mapping[str, int],
        worker_id: str,
        runnable: Sequence[str] = (),
    ) -> tuple[list[str | Exception], list[LockedJob]]:
        _check_batch(len(submissions))
        parts = _parts([result_message(s) for s in submissions])
        if len(parts) > 1:  # only a call of one part asks for grants: the rest as usual
            return await self.submit_results(submissions, timeout_s=timeout_s), []
        request = pb.SubmitResultsRequest(
            requests=parts[0],
            next_grants=[pb.QueueSlots(queue=q, slots=n) for q, n in sorted(wanted.items())],
            worker_id=worker_id,
            runnable_definitions=list(runnable),
        )
        response = await self._call_submit_results(request, timeout_s)
        return [result_answer(o) for o in response.outcomes], [
            locked_job(job) for job in response.grants
        ]

    async def _submit_results(
        self, requests: list[pb.SubmitResultRequest], timeout_s: float
    ) -> list[str | Exception]:
        request = pb.SubmitResultsRequest(requests=requests)
        response = await self._call_submit_results(request, timeout_s)
        return [result_answer(outcome) for outcome in response.outcomes]

    async def _call_submit_results(
        self, request: pb.SubmitResultsRequest, timeout_s: float
    ) -> pb.SubmitResultsResponse:
        try:
            response: pb.SubmitResultsResponse = await self._stub.SubmitResults(
                request, timeout=timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        if len(response.outcomes) != len(request.requests):
            raise ExecutorCallFailed(
                f"SubmitResults answered {len(response.outcomes)} of "
                f"{len(request.requests)} results"
            )
        return response

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        *,
        timeout_s: float,
        usage: Sequence[UsageRecord] = (),
        retry_after_s: float | None = None,
        signals_seen: int = 0,
    ) -> str:
        request = pb.SubmitFailureRequest(
            job_id=job_id,
            lease_token=lease_token,
            error_code=error_code,
            error_message=error_message,
            usage=[usage_to_pb(u) for u in usage],
            retry_after_ms=round((retry_after_s or 0) * 1000),
            signals_seen=signals_seen,
        )
        try:
            response = await self._stub.SubmitFailure(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return status_name(response.status)

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord], *, timeout_s: float
    ) -> int:
        _check_batch(len(usage))
        request = pb.ReportUsageRequest(
            job_id=job_id, lease_token=lease_token, usage=[usage_to_pb(u) for u in usage]
        )
        try:
            response = await self._stub.ReportUsage(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return int(response.recorded)

    async def record_step(
        self,
        job_id: str,
        lease_token: str,
        step: str,
        response: StepResponse,
        usage: UsageRecord,
        *,
        timeout_s: float,
    ) -> int:
        request = pb.RecordStepRequest(
            job_id=job_id,
            lease_token=lease_token,
            step=step,
            response=step_response_to_pb(response),
            usage=usage_to_pb(usage),
        )
        try:
            answer = await self._stub.RecordStep(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return int(answer.attempt)

    async def record_step_result(
        self, job_id: str, lease_token: str, step: StepResult, *, timeout_s: float
    ) -> tuple[bool, StepResult | None]:
        request = step_result_request(job_id, lease_token, step)
        try:
            answer = await self._stub.RecordStepResult(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return answer.recorded, stored_step_result(answer)

    async def resolve_credential(
        self, job_id: str, lease_token: str, *, timeout_s: float
    ) -> UserKey:
        request = pb.ResolveCredentialRequest(job_id=job_id, lease_token=lease_token)
        try:
            response = await self._stub.ResolveCredential(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return UserKey(response.api_key, response.provider, response.credential_id)

    async def acquire_call_permit(
        self, job_id: str, lease_token: str, tier: str, reserved_slot: str, *, timeout_s: float
    ) -> CallPermit:
        request = pb.AcquireCallPermitRequest(
            job_id=job_id, lease_token=lease_token, model_tier=tier, reserved_slot=reserved_slot
        )
        try:
            answer = await self._stub.AcquireCallPermit(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return CallPermit(
            granted=answer.granted,
            retry_after_s=answer.retry_after_ms / 1000,
            valid_for_s=answer.valid_for_ms / 1000,
            unlimited=answer.unlimited,
            reserved_slot=answer.reserved_slot,
            slot_at=answer.slot_at.ToNanoseconds() / 1e9 if answer.HasField("slot_at") else None,
        )

    async def report_rate_limited(
        self, job_id: str, lease_token: str, tier: str, retry_after_s: float, *, timeout_s: float
    ) -> None:
        request = pb.ReportRateLimitedRequest(
            job_id=job_id,
            lease_token=lease_token,
            model_tier=tier,
            retry_after_ms=round(retry_after_s * 1000),
        )
        try:
            await self._stub.ReportRateLimited(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc

    async def fetch_signals(
        self, job_id: str, lease_token: str, after_seq: int, *, timeout_s: float
    ) -> tuple[list[Signal], bool]:
        request = pb.FetchSignalsRequest(
            job_id=job_id, lease_token=lease_token, after_seq=after_seq
        )
        try:
            response = await self._stub.FetchSignals(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        signals = [
            Signal(
                seq=s.seq,
                name=s.name,
                payload=dict_from_struct(s.payload),
                sent_at=s.sent_at.ToDatetime(tzinfo=UTC),
            )
            for s in response.signals
        ]
        return signals, response.more

    async def fetch_dependency_results(
        self, job_id: str, lease_token: str, after_job_id: str, page_size: int, *, timeout_s: float
    ) -> tuple[list[DependencyOutput], bool]:
        request = pb.FetchDependencyResultsRequest(
            job_id=job_id, lease_token=lease_token, after_job_id=after_job_id, page_size=page_size
        )
        try:
            response = await self._stub.FetchDependencyResults(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        return [dependency_output(r) for r in response.results], response.more

    async def hold_session(
        self,
        worker_id: str,
        incarnation: str,
        goodbye: asyncio.Event,
        opened: Callable[[str], None],
        slots: SlotReports | None = None,
    ) -> None:
        """The WorkerSession stream (see ``ports.SessionApi``); fails fast (no waiting
        for a ready channel) so that a dead replica is left for a live one at once."""
        call = self._stub.WorkerSession(wait_for_ready=False)
        try:
            await hold(call, worker_id, incarnation, goodbye, opened, slots)
        except grpc.aio.AioRpcError as exc:
            raise error_from_call(exc) from exc
        finally:
            call.cancel()


def _check_batch(size: int) -> None:
    if size > MAX_BATCH:
        raise ValueError(f"at most {MAX_BATCH} items per batch call, not {size}")


def _parts(requests: list[pb.SubmitResultRequest]) -> list[list[pb.SubmitResultRequest]]:
    """The requests in order, in parts of at most MAX_CALL_BYTES (a larger request alone)."""
    parts: list[list[pb.SubmitResultRequest]] = [[]]
    size = 0
    for request in requests:
        item = request.ByteSize() + 8  # with its field tag and length prefix, generously
        if parts[-1] and size + item > MAX_CALL_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(request)
        size += item
    return parts
