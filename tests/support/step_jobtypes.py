"""``two_step``: an AI job of two checkpointed provider calls, for the checkpoint tests
(JOBS_JOB_TYPE_MODULES=tests.support.step_jobtypes in both services).

Step ``evaluate`` lists the key points of a text; step ``summarise`` writes a summary of
those points. Both answer from the fake provider (the prompts' ``fake`` functions).
``pause_ms`` is work between the steps: a test kills the worker there, after step one was
recorded, and shortens the pause in the snapshot for the attempt that resumes.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobtypes.aijob import parsed_object, run_step, validate_model
from shared.ai.prompts import PromptTemplate, register_prompt
from shared.ai.provider import ModelTier
from shared.constants import Queue
from shared.registry import ExecutionContext, JobDefinition, JobResult

JOB_TYPE = "two_step"


class TwoStepInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=5000)
    pause_ms: int = Field(default=0, ge=0, le=600_000)


class Points(BaseModel):
    model_config = ConfigDict(extra="forbid")

    points: list[str] = Field(min_length=1, max_length=5)


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, max_length=2000)


class TwoStepOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    points: list[str]
    summary: str


def _fake_points(variables: dict[str, Any]) -> dict[str, Any]:
    words = re.findall(r"\w{5,}", str(variables.get("text", "")).lower())
    return {"points": list(dict.fromkeys(words))[:3] or ["nothing"]}


def _fake_summary(variables: dict[str, Any]) -> dict[str, Any]:
    points = variables.get("points") or []
    return {"summary": f"{variables.get('topic', '')}: " + ", ".join(map(str, points))}


EVALUATE = register_prompt(
    PromptTemplate(
        key="two-step-evaluate",
        version="1",
        system='List the key points of the text as JSON {"points": [...]}.',
        user="Topic: {topic}\n\n{text}",
        fake=_fake_points,
    )
)
SUMMARISE = register_prompt(
    PromptTemplate(
        key="two-step-summarise",
        version="1",
        system='Summarise the points in one sentence as JSON {"summary": "..."}.',
        user="Topic: {topic}\nPoints: {points}",
        fake=_fake_summary,
    )
)


async def execute(job_input: TwoStepInput, ctx: ExecutionContext) -> JobResult:
    tier = ModelTier.PRIMARY
    rendered = EVALUATE.render({"topic": job_input.topic, "text": job_input.text})
    points = await run_step(
        ctx, "evaluate", tier, rendered, lambda r: validate_model(Points, parsed_object(r))
    )
    ctx.report_progress(0.5)
    if job_input.pause_ms:
        await asyncio.sleep(job_input.pause_ms / 1000)
    rendered = SUMMARISE.render({"topic": job_input.topic, "points": points.points})
    summary = await run_step(
        ctx, "summarise", tier, rendered, lambda r: validate_model(Summary, parsed_object(r))
    )
    ctx.report_progress(1.0)
    return JobResult(TwoStepOutput(points=points.points, summary=summary.summary))


DEFINITION = JobDefinition(
    job_type=JOB_TYPE,
    label="Two checkpointed steps",
    domain="testing",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=TwoStepInput,
    output_model=TwoStepOutput,
    execute=execute,
    model_tier=ModelTier.PRIMARY,
    timeout_s=120.0,
    max_attempts=4,
    backoff_base_s=0.1,
    backoff_max_s=0.5,
)


# ``two_tier``: the same two steps, the first on the cheap tier: one attempt calls two
# tiers, for the tests of rate limits per call (a 429 backs off the tier of the call).
async def execute_two_tier(job_input: TwoStepInput, ctx: ExecutionContext) -> JobResult:
    rendered = EVALUATE.render({"topic": job_input.topic, "text": job_input.text})
    points = await run_step(
        ctx,
        "evaluate",
        ModelTier.CHEAP,
        rendered,
        lambda r: validate_model(Points, parsed_object(r)),
    )
    rendered = SUMMARISE.render({"topic": job_input.topic, "points": points.points})
    summary = await run_step(
        ctx,
        "summarise",
        ModelTier.PRIMARY,
        rendered,
        lambda r: validate_model(Summary, parsed_object(r)),
    )
    return JobResult(TwoStepOutput(points=points.points, summary=summary.summary))


TWO_TIER = JobDefinition(
    job_type="two_tier",
    label="Two steps on two model tiers",
    domain="testing",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=TwoStepInput,
    output_model=TwoStepOutput,
    execute=execute_two_tier,
    model_tier=ModelTier.PRIMARY,
    timeout_s=120.0,
    max_attempts=4,
    backoff_base_s=0.1,
    backoff_max_s=0.5,
)

DEFINITIONS = [DEFINITION, TWO_TIER]
