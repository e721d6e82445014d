"""``sleeper``: a job that sleeps durably until a given time (``ctx.sleep_until``) and
answers when it woke, for ``bench.sleepers`` (JOBS_JOB_TYPE_MODULES=bench.sleep_jobtypes on
the worker)."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.registry import ExecutionContext, JobDefinition, JobResult


class SleeperInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    wake_at: float = Field(gt=0)  # epoch seconds


class SleeperOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    woke: float


async def execute(job_input: SleeperInput, ctx: ExecutionContext) -> JobResult:
    await ctx.sleep_until(job_input.wake_at)
    return JobResult(SleeperOutput(woke=time.time()))


DEFINITION = JobDefinition(
    job_type="sleeper",
    label="Sleeper",
    domain="bench",
    version="1",
    queue=Queue.BACKGROUND,
    input_model=SleeperInput,
    output_model=SleeperOutput,
    execute=execute,
    timeout_s=30.0,
    max_attempts=3,
)
