"""Job types for the deadline tests of issue 45 (JOBS_JOB_TYPE_MODULES=
tests.support.deadline_jobtypes on the worker). All share one queue whose worker slot is 1
(``concurrency``): while an attempt runs, nothing else of the queue does.

- ``flaky``: fails every attempt as the provider being down (retried, 100 attempts, backoff
  0.2..0.5 s): a job that retries until something ends it.
- ``stuck``: runs until cancelled (its timeout is 5 minutes): an attempt only the deadline
  can stop.
- ``napper``: sleeps ``seconds`` durably (``ctx.sleep``); its type's default deadline is
  ``NAPPER_DEADLINE_S`` after it is due.
- ``quick``: answers at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.errors import ErrorCode, ExecutionError
from shared.registry import ExecutionContext, JobDefinition, JobResult

QUEUE = Queue.BACKGROUND
NAPPER_DEADLINE_S = 3.0


class NoInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NapInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float = Field(ge=0, le=3600)


class Done(BaseModel):
    model_config = ConfigDict(extra="forbid")

    done: float


async def flaky(job_input: NoInput, ctx: ExecutionContext) -> JobResult:
    raise ExecutionError(ErrorCode.PROVIDER_UNAVAILABLE, "the provider is down (test)")


async def stuck(job_input: NoInput, ctx: ExecutionContext) -> JobResult:
    await asyncio.sleep(3600)
    return JobResult(Done(done=time.time()))


async def nap(job_input: NapInput, ctx: ExecutionContext) -> JobResult:
    await ctx.sleep(job_input.seconds)
    return JobResult(Done(done=time.time()))


async def quick(job_input: NoInput, ctx: ExecutionContext) -> JobResult:
    return JobResult(Done(done=time.time()))


def _definition(job_type: str, execute: Any, input_model: Any, **more: Any) -> JobDefinition:
    settings: dict[str, Any] = {
        "timeout_s": 300.0,
        "max_attempts": 100,
        "backoff_base_s": 0.2,
        "backoff_max_s": 0.5,
        **more,
    }
    return JobDefinition(
        job_type=job_type,
        label=job_type.capitalize(),
        domain="testing",
        version="1",
        queue=QUEUE,
        input_model=input_model,
        output_model=Done,
        execute=execute,
        concurrency=1,
        **settings,
    )


DEFINITIONS = [
    _definition("flaky", flaky, NoInput),
    _definition("stuck", stuck, NoInput),
    _definition("napper", nap, NapInput, deadline_s=NAPPER_DEADLINE_S),
    _definition("quick", quick, NoInput),
]
