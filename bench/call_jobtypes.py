"""``calls``: a job of one or two checkpointed provider calls on the primary tier, for
``bench.rate_limits`` (JOBS_JOB_TYPE_MODULES=bench.call_jobtypes in both services). With
the bench's server refusing some first answers (a repair call follows), a job makes one to
three calls."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobtypes.aijob import parsed_object, run_step, validate_model
from shared.ai.prompts import PromptTemplate, register_prompt
from shared.ai.provider import ModelTier
from shared.constants import Queue
from shared.registry import ExecutionContext, JobDefinition, JobResult


class CallsInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=500)
    steps: int = Field(ge=1, le=2)


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str = Field(min_length=1)


def _fake(variables: dict[str, Any]) -> dict[str, Any]:
    return {"answer": f"seen: {str(variables.get('text', ''))[:40]}"}


PROMPT = register_prompt(
    PromptTemplate(
        key="bench-calls",
        version="1",
        system='Answer as JSON {"answer": "..."}.',
        user="Step {step}: {text}",
        fake=_fake,
    )
)


async def execute(job_input: CallsInput, ctx: ExecutionContext) -> JobResult:
    answers = []
    for step in range(1, job_input.steps + 1):
        rendered = PROMPT.render({"step": step, "text": job_input.text})
        answer = await run_step(
            ctx,
            f"step{step}",
            ModelTier.PRIMARY,
            rendered,
            lambda r: validate_model(Answer, parsed_object(r)),
        )
        answers.append(answer.answer)
    return JobResult(Answer(answer=" | ".join(answers)))


DEFINITION = JobDefinition(
    job_type="calls",
    label="One or two provider calls",
    domain="testing",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=CallsInput,
    output_model=Answer,
    execute=execute,
    model_tier=ModelTier.PRIMARY,
    timeout_s=600.0,
    max_attempts=3,
    backoff_base_s=0.1,
    backoff_max_s=0.5,
)
