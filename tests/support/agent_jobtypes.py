"""``agent``: a job that acts, sleeps, waits for an approval and acts again, for the chaos
workload (tests/chaos/agents.py): ``ctx.step`` effects, a durable sleep and a durable
signal wait under every fault the harness injects.

Each effect appends a line to the file JOBS_CHAOS_EFFECTS_FILE names (the external system,
shared by every worker process of the run): its step's idempotency key, the attempt that
made the call and the wall-clock time of the call. The output says when the job slept
until and when its code went on past the sleep, the approval's payload (None after the
wait's timeout) and the effects' receipts.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.registry import ExecutionContext, JobDefinition, JobResult

EFFECTS_FILE_ENV = "JOBS_CHAOS_EFFECTS_FILE"
APPROVAL = "approve"


class AgentInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sleep_s: float = Field(ge=0, le=30)
    wait_s: float = Field(gt=0, le=600)


class AgentOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    until: float
    woke: float
    approval: dict[str, Any] | None
    receipts: list[str]


async def execute(job_input: AgentInput, ctx: ExecutionContext) -> JobResult:
    def effect(name: str) -> str:
        key = ctx.step_key
        with open(os.environ[EFFECTS_FILE_ENV], "a", encoding="utf-8") as ledger:
            ledger.write(f"{key} {ctx.attempt} {time.time():.6f}\n")
        return f"{name}:{key}"

    reserved = await ctx.step("reserve", effect, "reserve")
    until = await ctx.step("plan", lambda: time.time() + job_input.sleep_s)
    await ctx.sleep_until(until)
    woke = time.time()
    approval = await ctx.wait_for_signal(APPROVAL, job_input.wait_s)
    charged = await ctx.step("charge", effect, "charge")
    output = AgentOutput(until=until, woke=woke, approval=approval, receipts=[reserved, charged])
    return JobResult(output)


DEFINITION = JobDefinition(
    job_type="agent",
    label="Agent (chaos)",
    domain="testing",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=AgentInput,
    output_model=AgentOutput,
    execute=execute,
    timeout_s=30.0,
    max_attempts=5,
    backoff_base_s=0.1,
    backoff_max_s=0.5,
)
DEFINITIONS = [DEFINITION]
