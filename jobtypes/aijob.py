"""AI job types from a few declarative parts: how a team adds one.

``ai_job_definition`` builds a ``JobDefinition`` whose ``execute`` is the AI pipeline of
DESIGN §7, the same for every AI job type::

    render the prompt from the input          (prompt template + ``variables``)
    content-safety check of the prompt        (optional checker)
    provider call for the definition's tier   (ctx.generate: router, key, usage row),
      checkpointed as the step ``step``: a later attempt reuses the recorded response
      instead of calling again (worker_service/steps.py)
    parse: the answer must be a JSON object   VALIDATION_OUTPUT_MALFORMED (a provider
      hands over any answer's text; not JSON is judged here, like the schema)
    business validation of the raw answer     (optional ``validator``: reject/default/trim)
    the output model                          VALIDATION_OUTPUT_SCHEMA
      a VALIDATION_* failure: one repair call (seed 000 §5.2: "retry with the prompt
      adjusted"): the same messages, the rejected answer, and an instruction naming what
      was wrong; a repair that fails too fails the attempt (the job service retries it)
    content-safety check of the output        CONTENT_SAFETY_BLOCKED
    projection: artifacts and child jobs      (optional ``projector``; pure, no I/O)

The worker hashes the output and submits it with the projection; the job service commits
both with the status change in one transaction.

A job type of several provider calls runs each through ``run_step`` (call, validate,
repair) under its own step name: a resumed job reuses the steps recorded earlier and
continues at the first one that has no record.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from jobtypes.safety import SafetyChecker
from shared.ai.prompts import PromptNotFound, PromptTemplate, RenderedPrompt, get_prompt
from shared.ai.provider import Message, ModelTier, ProviderResponse
from shared.canonical import canonical_json
from shared.errors import ErrorClass, ErrorCode, ExecutionError, classify
from shared.registry import (
    ArtifactDraft,
    ChildJobDraft,
    ExecutionContext,
    JobDefinition,
    JobResult,
)
from shared.validation import describe_validation_error

# A schema failure's account in the job's error message is cut here.
MAX_DESCRIPTION_CHARS = 2000
# Repair calls per attempt after a VALIDATION_* failure (each is a billed provider call).
REPAIR_CALLS = 1
# The rejected answer shown back to the model is cut here.
MAX_ECHO_CHARS = 4000
# The step name of the one provider call of an ai_job_definition job.
DEFAULT_STEP = "answer"


@dataclass(frozen=True)
class ProjectionInput:
    """What a projector sees: the job, its input and its validated output."""

    job_id: str
    user_id: str
    attempt: int
    input: Any
    output: Any


@dataclass(frozen=True)
class Projection:
    artifacts: list[ArtifactDraft] = field(default_factory=list)
    children: list[ChildJobDraft] = field(default_factory=list)


Variables = Callable[[Any], dict[str, Any]]
# Business validation of the parsed answer, given the job's input: returns the answer to
# validate against the output model, or raises ExecutionError(VALIDATION_*).
Validator = Callable[[dict[str, Any], Any], dict[str, Any]]
Projector = Callable[[ProjectionInput], Projection]
M = TypeVar("M", bound=BaseModel)


async def run_step(
    ctx: ExecutionContext,
    step: str,
    tier: ModelTier,
    rendered: RenderedPrompt,
    check: Callable[[ProviderResponse], M],
) -> M:
    """One checkpointed provider call and its validation: the step's recorded response
    (an earlier attempt's) or a new call; a VALIDATION_* failure earns ``REPAIR_CALLS``
    repair calls (seed 000 §5.2: "retry with the prompt adjusted"), each recorded as the
    step in place of the rejected response; a repair that fails too fails the attempt.
    ``check`` turns the answer into the step's output or raises ExecutionError
    (VALIDATION_*) naming what was wrong."""
    response = await ctx.generate(tier, rendered, step=step)
    repairs = REPAIR_CALLS
    while True:
        try:
            return check(response)
        except ExecutionError as error:
            if classify(error.code) is not ErrorClass.VALIDATION or repairs == 0:
                raise
            repairs -= 1
            response = await ctx.generate(tier, repair_prompt(rendered, response, error), step=step)


def parsed_object(response: ProviderResponse) -> dict[str, Any]:
    """The answer's JSON object, or VALIDATION_OUTPUT_MALFORMED saying what it is instead
    (a provider hands over an answer that is not JSON as text, ``parsed`` None: judged
    here, it earns the repair call an answer off the schema earns)."""
    if response.parsed is None:
        raise ExecutionError(ErrorCode.VALIDATION_OUTPUT_MALFORMED, _not_an_object(response.text))
    return response.parsed


def _not_an_object(text: str) -> str:
    """Why ``text`` is not a JSON object, without quoting it."""
    try:
        json.loads(text)
    except ValueError:
        return "the answer is not JSON"
    return "the answer is JSON but not an object"


def validate_model(model: type[M], raw: dict[str, Any]) -> M:
    """``raw`` as ``model``, or VALIDATION_OUTPUT_SCHEMA describing what is wrong."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ExecutionError(
            ErrorCode.VALIDATION_OUTPUT_SCHEMA,
            describe_validation_error(exc, MAX_DESCRIPTION_CHARS),
        ) from None


def ai_job_definition(
    *,
    job_type: str,
    input_model: type[BaseModel],
    output_model: type[BaseModel],
    prompt: PromptTemplate,
    model_tier: ModelTier,
    variables: Variables,
    validator: Validator | None = None,
    projector: Projector | None = None,
    content_safety: SafetyChecker | None = None,
    step: str = DEFAULT_STEP,
    **definition: Any,
) -> JobDefinition:
    """A JobDefinition running the AI pipeline; ``definition`` holds the other
    JobDefinition fields (label, domain, version, queue, timeout_s, ...)."""

    def validated(response: ProviderResponse, job_input: BaseModel) -> BaseModel:
        raw = parsed_object(response)
        if validator is not None:
            raw = validator(raw, job_input)
        return validate_model(output_model, raw)

    async def execute(job_input: BaseModel, ctx: ExecutionContext) -> JobResult:
        rendered = template_for(prompt, ctx).render(variables(job_input))
        if content_safety is not None:
            for message in rendered.messages:
                check_content(content_safety, message.content, "prompt")
        output = await run_step(
            ctx, step, model_tier, rendered, lambda response: validated(response, job_input)
        )
        if content_safety is not None:
            check_content(content_safety, canonical_json(output.model_dump(mode="json")), "output")
        projection = (
            projector(ProjectionInput(ctx.job_id, ctx.user_id, ctx.attempt, job_input, output))
            if projector is not None
            else Projection()
        )
        ctx.report_progress(1.0)
        return JobResult(output, projection.artifacts, projection.children)

    return JobDefinition(
        job_type=job_type,
        input_model=input_model,
        output_model=output_model,
        execute=execute,
        prompt_key=prompt.key,
        prompt_version=prompt.version,
        model_tier=model_tier,
        content_safety_check=content_safety is not None,
        **definition,
    )


def repair_prompt(
    rendered: RenderedPrompt, answer: ProviderResponse, error: ExecutionError
) -> RenderedPrompt:
    """The prompt again, followed by the rejected answer and what was wrong with it (the
    error's detail: locations and reasons, never the input's values)."""
    instruction = (
        f"Your previous answer was rejected ({error.code}): "
        f"{error.detail or 'it did not have the expected shape'}. "
        "Answer again with one JSON object that follows the instructions above and fixes "
        "exactly this."
    )
    return RenderedPrompt(
        key=rendered.key,
        version=rendered.version,
        messages=(
            *rendered.messages,
            Message("assistant", answer.text[:MAX_ECHO_CHARS]),
            Message("user", instruction),
        ),
        variables=rendered.variables,
    )


def template_for(default: PromptTemplate, ctx: ExecutionContext) -> PromptTemplate:
    """The version the job was created with: a job queued before a prompt change still
    runs with the prompt it recorded (a job type that calls ``run_step`` itself uses it
    too)."""
    key, version = ctx.prompt
    if not key or (key, version) == (default.key, default.version):
        return default
    try:
        return get_prompt(key, version)
    except PromptNotFound:
        raise ExecutionError(
            ErrorCode.INTERNAL_ERROR, f"prompt {key}@{version} is not deployed here"
        ) from None


def check_content(checker: SafetyChecker, text: str, where: str) -> None:
    """CONTENT_SAFETY_BLOCKED naming the rule ``text`` broke (never the text itself)."""
    rule = checker.check(text)
    if rule is not None:
        raise ExecutionError(ErrorCode.CONTENT_SAFETY_BLOCKED, f"{where} broke rule {rule}")
