"""ExecutorApi over gRPC: the job service's ExecutorService on one shared aio channel."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC

import grpc

from shared.ai.provider import UsageRecord
from shared.ai.steps import RecordedStep, StepResponse
from shared.credentials import CredentialMode
from shared.grpc_client import ChannelConfig, aio_channel
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import executor_service_pb2_grpc, job_pb2
from shared.pbconv import (
    artifact_to_pb,
    dict_from_struct,
    recorded_step_from_pb,
    step_response_to_pb,
    struct_from_dict,
    usage_to_pb,
)
from shared.rpc_errors import error_from_rpc, error_from_status
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable
from worker_service.domain.model import (
    HeartbeatReply,
    LockedJob,
    LockOutcome,
    LockResult,
    ResultSubmission,
    Signal,
    UserKey,
)
from worker_service.ports import MAX_BATCH

# Failures that say nothing about the call but that it did not get through (or its answer
# did not get back): retrying is safe, every executor call being fenced by its lease token.
TRANSIENT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)

# A refused batch item carries its code as the google.rpc.Code number.
_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}
_TRANSIENT_NAMES = frozenset(code.name for code in TRANSIENT_CODES)

# A SubmitResults batch goes in concurrent parts under this size: a job service that keeps
# gRPC's default 4 MiB limit still takes every part, and a result too large on its own goes
# alone and fails alone, as a single SubmitResult would have.
MAX_CALL_BYTES = 3 * 1024 * 1024

# How long the job service gets to answer a worker's goodbye.
GOODBYE_TIMEOUT_S = 2.0

# Message limits come from shared.grpc_client; a long-lived worker channel also pings.
CHANNEL_OPTIONS = (("grpc.keepalive_time_ms", 30_000),)

_OUTCOMES = {
    pb.LOCK_OUTCOME_LOCKED: LockOutcome.LOCKED,
    pb.LOCK_OUTCOME_NOT_DUE: LockOutcome.NOT_DUE,
    pb.LOCK_OUTCOME_UNAVAILABLE: LockOutcome.UNAVAILABLE,
}
_STATUS_PREFIX = "JOB_STATUS_"


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
            raise _translate(exc) from exc
        if len(response.responses) != len(job_ids):
            raise ExecutorCallFailed(
                f"LockJobs answered {len(response.responses)} of {len(job_ids)} jobs"
            )
        return [_lock_result(answer) for answer in response.responses]

    async def heartbeat(
        self, job_id: str, lease_token: str, progress: float, *, timeout_s: float
    ) -> HeartbeatReply:
        request = pb.HeartbeatRequest(job_id=job_id, lease_token=lease_token, progress=progress)
        try:
            response = await self._stub.Heartbeat(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
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

    async def _submit_results(
        self, requests: list[pb.SubmitResultRequest], timeout_s: float
    ) -> list[str | Exception]:
        request = pb.SubmitResultsRequest(requests=requests)
        try:
            response = await self._stub.SubmitResults(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        if len(response.outcomes) != len(requests):
            raise ExecutorCallFailed(
                f"SubmitResults answered {len(response.outcomes)} of {len(requests)} results"
            )
        return [_result_answer(outcome) for outcome in response.outcomes]

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
    ) -> str:
        request = pb.SubmitFailureRequest(
            job_id=job_id,
            lease_token=lease_token,
            error_code=error_code,
            error_message=error_message,
            usage=[usage_to_pb(u) for u in usage],
            retry_after_ms=round((retry_after_s or 0) * 1000),
        )
        try:
            response = await self._stub.SubmitFailure(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        return _status_name(response.status)

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
            raise _translate(exc) from exc
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
            raise _translate(exc) from exc
        return int(answer.attempt)

    async def resolve_credential(
        self, job_id: str, lease_token: str, *, timeout_s: float
    ) -> UserKey:
        request = pb.ResolveCredentialRequest(job_id=job_id, lease_token=lease_token)
        try:
            response = await self._stub.ResolveCredential(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        return UserKey(response.api_key, response.provider, response.credential_id)

    async def fetch_signals(
        self, job_id: str, lease_token: str, after_seq: int, *, timeout_s: float
    ) -> tuple[list[Signal], bool]:
        request = pb.FetchSignalsRequest(
            job_id=job_id, lease_token=lease_token, after_seq=after_seq
        )
        try:
            response = await self._stub.FetchSignals(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
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

    async def hold_session(
        self, worker_id: str, goodbye: asyncio.Event, opened: Callable[[str], None]
    ) -> None:
        """The WorkerSession stream (see ``ports.SessionApi``); fails fast (no waiting
        for a ready channel) so that a dead replica is left for a live one at once."""
        call = self._stub.WorkerSession(wait_for_ready=False)
        try:
            await _hold(call, worker_id, goodbye, opened)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from exc
        finally:
            call.cancel()


async def _hold(
    call: grpc.aio.StreamStreamCall,
    worker_id: str,
    goodbye: asyncio.Event,
    opened: Callable[[str], None],
) -> None:
    await call.write(pb.WorkerSessionRequest(worker_id=worker_id))
    first = await call.read()
    if first is grpc.aio.EOF:
        raise ExecutorUnreachable("the job service ended the session at once")
    opened(first.session_id)
    interval = max(0.05, first.ping_interval_ms / 1000)
    answers = asyncio.ensure_future(_until_closed(call))
    leaving = asyncio.ensure_future(goodbye.wait())
    try:
        while True:
            await asyncio.wait({answers, leaving}, timeout=interval, return_when="FIRST_COMPLETED")
            if answers.done():
                answers.result()  # raises the stream's failure
                raise ExecutorUnreachable("the job service ended the session")
            if leaving.done():
                break
            await call.write(pb.WorkerSessionRequest())  # a ping: data both ways
        await call.write(pb.WorkerSessionRequest(goodbye=True))
        await call.done_writing()
        await asyncio.wait({answers}, timeout=GOODBYE_TIMEOUT_S)
    finally:
        answers.cancel()
        leaving.cancel()


async def _until_closed(call: grpc.aio.StreamStreamCall) -> bool:
    """Reads the session's answers (pongs) until ``closed`` (True) or the end (False)."""
    while True:
        answer = await call.read()
        if answer is grpc.aio.EOF:
            return False
        if answer.closed:
            return True


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


def _lock_result(response: pb.LockJobResponse) -> LockResult | Exception:
    outcome = _OUTCOMES.get(response.outcome)
    if outcome is None:
        return ExecutorCallFailed(f"LockJobs answered outcome {response.outcome}")
    if outcome is LockOutcome.LOCKED:
        return LockResult(outcome, job=_locked_job(response.job))
    if outcome is LockOutcome.NOT_DUE:
        retry_after = (
            response.retry_after.ToNanoseconds() / 1e9 if response.HasField("retry_after") else None
        )
        return LockResult(outcome, retry_after=retry_after)
    return LockResult(outcome)


def result_message(submission: ResultSubmission) -> pb.SubmitResultRequest:
    """One SubmitResult item as the wire carries it (also used by tests playing a worker)."""
    result = submission.result
    return pb.SubmitResultRequest(
        job_id=submission.job_id,
        lease_token=submission.lease_token,
        output=struct_from_dict(result.output),
        output_hash=result.output_hash,
        artifacts=[artifact_to_pb(a) for a in result.artifacts],
        child_jobs=[
            pb.ChildJob(
                job_type=c.job_type,
                input=struct_from_dict(c.input),
                idempotency_key=c.idempotency_key,
                priority=c.priority,
            )
            for c in result.children
        ],
        usage=[usage_to_pb(u) for u in result.usage],
    )


def _result_answer(outcome: pb.SubmitResultOutcome) -> str | Exception:
    """The status an accepted item ended in, or the error a refused one stands for, exactly
    as a single SubmitResult call would have failed."""
    if not outcome.HasField("error"):
        return _status_name(outcome.status)
    error = error_from_status(outcome.error)
    if error is not None:
        return error
    code = _CODE_NAMES.get(outcome.error.code, str(outcome.error.code))
    if code in _TRANSIENT_NAMES:
        return ExecutorUnreachable(f"{code}: {outcome.error.message}")
    return ExecutorCallFailed(f"{code}: {outcome.error.message}")


def _locked_job(job: pb.LockedJob) -> LockedJob:
    return LockedJob(
        job_id=job.job_id,
        job_type=job.job_type,
        lease_token=job.lease_token,
        attempt=job.attempt,
        input=dict_from_struct(job.input),
        lease_ttl_ms=job.lease_ttl_ms,
        heartbeat_interval_ms=job.heartbeat_interval_ms,
        user_id=job.user_id,
        prompt_key=job.prompt_key,
        prompt_version=job.prompt_version,
        credential_mode=(
            CredentialMode.USER
            if job.credential_mode == job_pb2.CREDENTIAL_MODE_USER
            else CredentialMode.PLATFORM
        ),
        credential_id=job.credential_id,
        recorded_steps=_recorded_steps(job),
    )


def _recorded_steps(job: pb.LockedJob) -> tuple[RecordedStep, ...]:
    """The job's recorded steps; one the worker cannot read is left out (its step is
    called again)."""
    steps = []
    for message in job.recorded_steps:
        try:
            steps.append(recorded_step_from_pb(message))
        except ValueError:
            continue
    return tuple(steps)


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
