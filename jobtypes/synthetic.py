"""`synthetic`: a deterministic job for tests and benchmarks.

It sleeps, fails, or hangs as its input says, and produces an output of a chosen size.
Its sleep is the *job's* work (standing in for a provider call), so it honours cancellation
like any real call would. It may run on its owner's provider key (CREDENTIAL_MODE_USER):
it then obtains the key as an AI job would and records only the key's fingerprint.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.credentials import CredentialMode, fingerprint
from shared.errors import ErrorCode, ExecutionError
from shared.registry import ArtifactDraft, ExecutionContext, JobDefinition, JobResult

MAX_SLEEP_MS = 600_000
MAX_OUTPUT_BYTES = 1_000_000


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


class SyntheticOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attempt: int
    data: str


async def execute(job_input: SyntheticInput, ctx: ExecutionContext) -> JobResult:
    if job_input.fail is FailMode.HANG:
        await asyncio.Event().wait()
    if job_input.sleep_ms:
        await asyncio.sleep(job_input.sleep_ms / 1000)
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
    output = SyntheticOutput(attempt=ctx.attempt, data="x" * job_input.output_bytes)
    artifact = ArtifactDraft(
        artifact_type="synthetic_result", artifact_id=f"syn_{ctx.job_id}", payload=payload
    )
    return JobResult(output=output, artifacts=[artifact])


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
