"""`study_plan`: what to study next in a knowledge base, from its items' evaluations (the
fan-in of a ``knowledge_base_review``).

Background queue, primary tier, prompt ``study-plan`` 1.0.0. The job waits for its
dependencies — the review's ``feynman_evaluation`` children, or any jobs named in
CreateJob's ``depends_on`` — and reads how they ended (``ctx.dependency_results()``). The
counting is plain code: the evaluations that succeeded are reviewed, the others (failed,
cancelled, or an output it cannot read) counted as failed, and the weakest items (lowest
score first, mastered ones left out) picked. The model writes the plan over those items —
steps that each name one of them — and a summary; a step naming another item is rejected
(VALIDATION_OUTPUT_REJECTED, which earns a repair call). Nothing reviewed: no model call,
an empty plan.

Output ``{knowledge_base_id, items_reviewed, items_failed, average_score, weakest_items[],
summary, plan[{knowledge_item_id, focus}]}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobtypes.aijob import check_content, parsed_object, run_step, template_for, validate_model
from jobtypes.safety import DEFAULT_CHECKER
from shared.ai.prompts import PromptTemplate, register_prompt
from shared.ai.provider import ModelTier, ProviderResponse
from shared.canonical import canonical_json
from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.dependencies import DependencyOutput
from shared.errors import ErrorCode, ExecutionError
from shared.registry import AbortStrategy, ExecutionContext, JobDefinition, JobResult

JOB_TYPE = "study_plan"
EVALUATION_TYPE = "feynman_evaluation"  # named, not imported: any job may be a dependency
MODEL_TIER = ModelTier.PRIMARY
STEP = "plan"
# The plan covers this many items at most: a learner works through a few at a time.
MAX_WEAKEST = 5
MAX_STEPS = 10
# An item scored at least this with no weakness left needs no study.
MASTERED_SCORE = 90


class StudyPlanInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    knowledge_base_id: str = Field(min_length=1, max_length=255)


class WeakItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    knowledge_item_id: str
    score: int
    weaknesses: list[str]


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    knowledge_item_id: str = Field(min_length=1, max_length=255)
    focus: str = Field(min_length=1, max_length=500)


class PlanAnswer(BaseModel):
    """What the model writes."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, max_length=2000)
    steps: list[PlanStep] = Field(default_factory=list, max_length=MAX_STEPS)


class StudyPlanOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    knowledge_base_id: str
    items_reviewed: int
    items_failed: int
    # The rounded mean score of the reviewed items (None: none reviewed).
    average_score: int | None
    weakest_items: list[WeakItem]
    summary: str
    plan: list[PlanStep]


class _Evaluation(BaseModel):
    """The part of a feynman_evaluation output the plan reads (it ignores the rest)."""

    model_config = ConfigDict(extra="ignore")

    score: int = Field(ge=0, le=100)
    summary: str = ""
    weaknesses: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Evaluated:
    knowledge_item_id: str
    score: int
    summary: str
    weaknesses: list[str]


@dataclass(frozen=True)
class Review:
    """How the evaluations ended: those that can be planned over, and how many cannot."""

    evaluated: list[Evaluated]
    failed: int

    @property
    def average_score(self) -> int | None:
        if not self.evaluated:
            return None
        return round(sum(e.score for e in self.evaluated) / len(self.evaluated))

    def weakest(self) -> list[Evaluated]:
        """The items to study, lowest score first (ties by id), at most MAX_WEAKEST."""
        open_items = [e for e in self.evaluated if e.weaknesses or e.score < MASTERED_SCORE]
        return sorted(open_items, key=lambda e: (e.score, e.knowledge_item_id))[:MAX_WEAKEST]


def review_of(results: list[DependencyOutput]) -> Review:
    """The evaluations among the dependencies. A succeeded one whose output cannot be read
    (another job type, a changed or redacted schema) counts as failed, not as a zero."""
    evaluated: list[Evaluated] = []
    failed = 0
    for result in results:
        evaluation = _evaluation(result)
        if evaluation is None:
            failed += 1
            continue
        evaluated.append(
            Evaluated(
                # feynman_evaluation's default target is its knowledge item
                knowledge_item_id=result.target_id or result.job_id,
                score=evaluation.score,
                summary=evaluation.summary,
                weaknesses=list(evaluation.weaknesses),
            )
        )
    return Review(evaluated, failed)


def _evaluation(result: DependencyOutput) -> _Evaluation | None:
    if result.status != "succeeded" or result.job_type != EVALUATION_TYPE or not result.output:
        return None
    try:
        return _Evaluation.model_validate(result.output)
    except ValidationError:
        return None


def variables(knowledge_base_id: str, review: Review) -> dict[str, Any]:
    return {
        "knowledge_base_id": knowledge_base_id,
        "items_reviewed": len(review.evaluated),
        "items_failed": review.failed,
        "average_score": review.average_score,
        "weakest": [
            {
                "knowledge_item_id": e.knowledge_item_id,
                "score": e.score,
                "summary": e.summary,
                "weaknesses": e.weaknesses,
            }
            for e in review.weakest()
        ],
    }


def _fake(variables: dict[str, Any]) -> dict[str, Any]:
    """A plausible plan, deterministic in its input: a step per weakness of each weak
    item, weakest first; an item without one is explained again."""
    weakest = variables.get("weakest") or []
    steps = []
    for item in weakest:
        item_id = str(item.get("knowledge_item_id", ""))
        for weakness in item.get("weaknesses") or ["Explain it again in your own words"]:
            steps.append({"knowledge_item_id": item_id, "focus": str(weakness)[:500]})
    first = f"; start with {weakest[0].get('knowledge_item_id')}" if weakest else ""
    return {
        "summary": (
            f"{variables.get('items_reviewed', 0)} items reviewed, average score "
            f"{variables.get('average_score')}{first}."
        ),
        "steps": steps[:MAX_STEPS],
    }


PROMPT = register_prompt(
    PromptTemplate(
        key="study-plan",
        version="1.0.0",
        system=(
            "You plan a learner's next study session over a knowledge base. You are given "
            "the items the learner explained least well, each with its evaluation score "
            "(0-100), a summary and its weaknesses. Answer with one JSON object: summary "
            "(at most 3 sentences on where the learner stands), steps (a list of at most "
            f"{MAX_STEPS} objects, most urgent first, each with knowledge_item_id — one of "
            "the given items — and focus: what to study or practise, in one sentence)."
        ),
        user=(
            "Knowledge base: {knowledge_base_id}\n"
            "Items reviewed: {items_reviewed} (average score {average_score}); "
            "items that could not be reviewed: {items_failed}\n\n"
            "Weakest items:\n{weakest}"
        ),
        fake=_fake,
    )
)


def checked(response: ProviderResponse, weakest: list[Evaluated]) -> PlanAnswer:
    """The model's plan, every step about one of the items it was given."""
    answer = validate_model(PlanAnswer, parsed_object(response))
    known = {e.knowledge_item_id for e in weakest}
    unknown = sorted({s.knowledge_item_id for s in answer.steps} - known)
    if unknown:
        raise ExecutionError(
            ErrorCode.VALIDATION_OUTPUT_REJECTED,
            f"{len(unknown)} plan steps name an item that was not given; each step must "
            "name one of the given knowledge_item_id values",
        )
    return answer


async def execute(job_input: StudyPlanInput, ctx: ExecutionContext) -> JobResult:
    review = review_of(await ctx.dependency_results())
    weakest = review.weakest()
    if not review.evaluated:
        answer = PlanAnswer(summary="No evaluation of this knowledge base succeeded.")
    else:
        rendered = template_for(PROMPT, ctx).render(variables(job_input.knowledge_base_id, review))
        for message in rendered.messages:
            check_content(DEFAULT_CHECKER, message.content, "prompt")
        answer = await run_step(
            ctx, STEP, MODEL_TIER, rendered, lambda response: checked(response, weakest)
        )
        check_content(DEFAULT_CHECKER, canonical_json(answer.model_dump(mode="json")), "output")
    ctx.report_progress(1.0)
    output = StudyPlanOutput(
        knowledge_base_id=job_input.knowledge_base_id,
        items_reviewed=len(review.evaluated),
        items_failed=review.failed,
        average_score=review.average_score,
        weakest_items=[
            WeakItem(knowledge_item_id=e.knowledge_item_id, score=e.score, weaknesses=e.weaknesses)
            for e in weakest
        ],
        summary=answer.summary,
        plan=answer.steps,
    )
    return JobResult(output)


DEFINITION = JobDefinition(
    job_type=JOB_TYPE,
    label="Study plan",
    domain="learning",
    version="1.0.0",
    queue=Queue.BACKGROUND,
    input_model=StudyPlanInput,
    output_model=StudyPlanOutput,
    execute=execute,
    prompt_key=PROMPT.key,
    prompt_version=PROMPT.version,
    model_tier=MODEL_TIER,
    content_safety_check=True,
    # "every plan of this knowledge base" (ListJobs' target filter)
    default_target=("knowledge_base", "input.knowledge_base_id"),
    # a child of a review runs with its parent's key, the platform's or the owner's
    credential_modes=(CredentialMode.PLATFORM, CredentialMode.USER),
    timeout_s=60.0,
    max_attempts=3,
    backoff_base_s=1.0,
    backoff_max_s=30.0,
    abort_strategy=AbortStrategy.RETRY,
)
