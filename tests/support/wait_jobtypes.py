"""Job types that sleep and wait for signals durably (``ctx.sleep``, ``ctx.wait_for_signal``),
for the tests of issue 45 (JOBS_JOB_TYPE_MODULES=tests.support.wait_jobtypes on the worker).
All three share one queue, whose worker slots are 2 (``concurrency``): a job that holds a
slot while it waits would keep the others out.

- ``sleeper``: records when it started (a step), sleeps ``seconds``, answers when it woke.
- ``waiter``: waits up to ``timeout`` seconds for a signal named ``name``; answers its
  payload (None after the timeout) and when it woke.
- ``quick``: answers at once.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.registry import ExecutionContext, JobDefinition, JobResult

QUEUE = Queue.BACKGROUND
SLOTS = 2


class SleeperInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float = Field(ge=0, le=3600)


class SleeperOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    started: float
    woke: float


async def sleep(job_input: SleeperInput, ctx: ExecutionContext) -> JobResult:
    started = await ctx.step("started", time.time)
    await ctx.sleep(job_input.seconds)
    return JobResult(SleeperOutput(started=started, woke=time.time()))


class WaiterInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    timeout: float = Field(gt=0, le=3600)


class WaiterOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payload: dict[str, Any] | None
    woke: float


async def wait(job_input: WaiterInput, ctx: ExecutionContext) -> JobResult:
    payload = await ctx.wait_for_signal(job_input.name, job_input.timeout)
    return JobResult(WaiterOutput(payload=payload, woke=time.time()))


class QuickInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuickOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    done: float


async def quick(job_input: QuickInput, ctx: ExecutionContext) -> JobResult:
    return JobResult(QuickOutput(done=time.time()))


def _definition(job_type: str, execute: Any, input_model: Any, output_model: Any) -> JobDefinition:
    return JobDefinition(
        job_type=job_type,
        label=job_type.capitalize(),
        domain="testing",
        version="1",
        queue=QUEUE,
        input_model=input_model,
        output_model=output_model,
        execute=execute,
        timeout_s=30.0,
        max_attempts=3,
        backoff_base_s=0.1,
        backoff_max_s=0.5,
        concurrency=SLOTS,
    )


DEFINITIONS = [
    _definition("sleeper", sleep, SleeperInput, SleeperOutput),
    _definition("waiter", wait, WaiterInput, WaiterOutput),
    _definition("quick", quick, QuickInput, QuickOutput),
]
