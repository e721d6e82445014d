"""``effects``: a job of three durable steps with side effects (``ctx.step``), for the
durable step tests (JOBS_JOB_TYPE_MODULES=tests.support.effect_jobtypes on the worker).

The external system is a file (``ledger``, a path in the input): each effect appends one
line, its step's idempotency key, as a system that deduplicates by key would log each
request it got. ``kill_at`` SIGKILLs the worker process during the first attempt's
``charge`` step, at one point of it: before its effect, after its effect (before its
record), or after its record (before the next step). ``reorder_on_retry`` asks for the
steps in another order on later attempts: NONDETERMINISTIC. ``refuse`` makes ``charge``
raise a job error, which is recorded like a result.
"""

from __future__ import annotations

import os
import signal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.errors import ExecutionError
from shared.registry import ExecutionContext, JobDefinition, JobResult

JOB_TYPE = "effects"
STEPS = ("reserve", "charge", "notify")


class EffectsInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ledger: str = Field(min_length=1, max_length=4096)
    kill_at: Literal["", "before_effect", "after_effect", "after_record"] = ""
    reorder_on_retry: bool = False
    refuse: bool = False


class EffectsOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    receipts: list[str]


def _kill(job_input: EffectsInput, ctx: ExecutionContext, point: str) -> None:
    if job_input.kill_at == point and ctx.attempt == 1:
        os.kill(os.getpid(), signal.SIGKILL)


async def execute(job_input: EffectsInput, ctx: ExecutionContext) -> JobResult:
    def effect(step: str) -> str:
        if step == "charge":
            _kill(job_input, ctx, "before_effect")
            if job_input.refuse:
                raise ExecutionError("JOB_REJECTED", "the card was declined")
        key = ctx.step_key
        with open(job_input.ledger, "a", encoding="utf-8") as ledger:
            ledger.write(key + "\n")
        if step == "charge":
            _kill(job_input, ctx, "after_effect")
        return f"{step}:{key}"

    steps = STEPS[::-1] if job_input.reorder_on_retry and ctx.attempt > 1 else STEPS
    receipts = []
    for step in steps:
        receipts.append(await ctx.step(step, effect, step))
        if step == "charge":
            _kill(job_input, ctx, "after_record")
    return JobResult(EffectsOutput(receipts=receipts))


DEFINITION = JobDefinition(
    job_type=JOB_TYPE,
    label="Three durable steps with side effects",
    domain="testing",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=EffectsInput,
    output_model=EffectsOutput,
    execute=execute,
    timeout_s=60.0,
    max_attempts=4,
    backoff_base_s=0.1,
    backoff_max_s=0.5,
)

DEFINITIONS = [DEFINITION]
