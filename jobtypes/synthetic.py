"""`synthetic`: a deterministic job for tests and benchmarks.

It sleeps, fails, or hangs as its input says, and produces an output of a chosen size.
With ``wait_signals`` it first waits for those signals (JobService.SendSignal), one after
the other, then sleeps, and its output lists every signal the attempt received with its
payload, then any further ones of those names that arrived by the end (so a signal
received twice would show twice).
Its sleep is the *job's* work (standing in for a provider call), so it honours cancellation
like any real call would. It may run on its owner's provider key (CREDENTIAL_MODE_USER):
it then obtains the key as an AI job would and records only the key's fingerprint.
"""

from __future__ import annotations

import asyncio
import time
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
)

from shared.constants import Queue
from shared.credentials import CredentialMode, fingerprint
from shared.errors import ErrorCode, ExecutionError
from shared.registry import ArtifactDraft, ExecutionContext, JobDefinition, JobResult

MAX_SLEEP_MS = 600_000
MAX_OUTPUT_BYTES = 1_000_000
SignalName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")]


class FailMode(StrEnum):
    NONE = "none"
    RETRYABLE = "retryable"  # like a provider 5xx: retried with backoff
    FATAL = "fatal"  # the job declares its input unworkable: never retried
    HANG = "hang"  # never returns: ends by timeout or cancellation


class SyntheticInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sleep_ms: int = Field(default=0, ge=0, le=MAX_SLEEP_MS)
    fail: FailMode = FailMode.NONE
    # For `retryable`: attempts that fail before one succeeds.
    fail_times: int = Field(default=0, ge=0, le=100)
    output_bytes: int = Field(default=16, ge=0, le=MAX_OUTPUT_BYTES)
    # Signals to wait for first, in this order; each wait ends the attempt (JOB_REJECTED)
    # after signal_timeout_ms.
    wait_signals: list[SignalName] = Field(default_factory=list, max_length=20)
    signal_timeout_ms: int = Field(default=20_000, ge=0, le=MAX_SLEEP_MS)

    @model_serializer(mode="wrap")
    def _without_unused_signal_fields(
        self, handler: SerializerFunctionWrapHandler
    ) -> dict[str, Any]:
        # the snapshot of a job that waits for no signal stays as it was before this mode
        data: dict[str, Any] = handler(self)
        if not self.wait_signals:
            data.pop("wait_signals", None)
            data.pop("signal_timeout_ms", None)
        return data


class SignalSeen(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    payload: dict[str, Any]
    # The worker's wall clock when job code received it (bench/signals.py's latency).
    received_at: float


class SyntheticOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attempt: int
    data: str
    # Set in the wait_signals mode only (left out of the JSON otherwise).
    signals: list[SignalSeen] | None = None

    @model_serializer(mode="wrap")
    def _without_unset_signals(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("signals") is None:
            data.pop("signals", None)
        return data


async def execute(job_input: SyntheticInput, ctx: ExecutionContext) -> JobResult:
    if job_input.fail is FailMode.HANG:
        await asyncio.Event().wait()
    signals = await _wait_for_signals(job_input, ctx) if job_input.wait_signals else None
    if job_input.sleep_ms:
        await asyncio.sleep(job_input.sleep_ms / 1000)
    if signals is not None:
        # anything else of those names that arrived meanwhile: a signal handed over twice
        # would show here
        for name in dict.fromkeys(job_input.wait_signals):
            while (extra := await ctx.poll_signal(name)) is not None:
                signals.append(SignalSeen(name=name, payload=extra, received_at=time.time()))
    if job_input.fail is FailMode.FATAL:
        raise ExecutionError(ErrorCode.JOB_REJECTED, "synthetic fatal failure")
    if job_input.fail is FailMode.RETRYABLE and ctx.attempt <= job_input.fail_times:
        raise ExecutionError(
            ErrorCode.PROVIDER_UNAVAILABLE, f"synthetic failure on attempt {ctx.attempt}"
        )
    payload: dict[str, object] = {"attempt": ctx.attempt, "bytes": job_input.output_bytes}
    # Obtain the provider key as an AI job would (free for platform-key jobs: no call) and
    # record a user key's fingerprint, never the key, so tests can see the right one arrived.
    api_key = await ctx.api_key()
    if api_key is not None:
        payload["api_key"] = fingerprint(api_key)
    ctx.report_progress(1.0)
    output = SyntheticOutput(
        attempt=ctx.attempt, data="x" * job_input.output_bytes, signals=signals
    )
    artifact = ArtifactDraft(
        artifact_type="synthetic_result", artifact_id=f"syn_{ctx.job_id}", payload=payload
    )
    return JobResult(output=output, artifacts=[artifact])


async def _wait_for_signals(job_input: SyntheticInput, ctx: ExecutionContext) -> list[SignalSeen]:
    seen: list[SignalSeen] = []
    timeout_s = job_input.signal_timeout_ms / 1000
    for i, name in enumerate(job_input.wait_signals):
        try:
            payload = await ctx.signal(name, timeout=timeout_s)
        except TimeoutError:
            raise ExecutionError(
                ErrorCode.JOB_REJECTED, f"no signal {name!r} within {timeout_s:g}s"
            ) from None
        seen.append(SignalSeen(name=name, payload=payload, received_at=time.time()))
        ctx.report_progress((i + 1) / len(job_input.wait_signals))
    return seen


DEFINITION = JobDefinition(
    job_type="synthetic",
    label="Synthetic job",
    domain="testing",
    version="1.0.0",
    queue=Queue.INTERACTIVE,
    input_model=SyntheticInput,
    output_model=SyntheticOutput,
    execute=execute,
    timeout_s=30.0,
    max_attempts=4,
    backoff_base_s=0.2,
    backoff_max_s=5.0,
    # Its work is a sleep, like waiting on a provider: one worker holds many at once, and
    # more in flight means fuller LockJobs/SubmitResults batches.
    concurrency=128,
    credential_modes=(CredentialMode.PLATFORM, CredentialMode.USER),
)
