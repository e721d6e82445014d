"""`knowledge_base_review`: review a whole knowledge base at once (fan-out and fan-in).

Background queue, no model call of its own. Input: a knowledge base and 1..200 of its
items, each with the learner's explanation. Output ``{knowledge_base_id, items}``. Its
result creates, in the same transaction:

- one ``feynman_evaluation`` child per item (the fan-out; idempotency key
  ``kbr:<jobId>:item:<ordinal>``), whose input is the item's — each grades one explanation
  and goes on to write its review cards, as one created directly does;
- one ``study_plan`` child (``kbr:<jobId>:plan``) that waits for all of them (the fan-in,
  a join: ``depends_on_keys`` names its siblings). Its policy is RUN: an evaluation that
  failed or was cancelled does not stop the plan, which counts it as not reviewed.

The evaluations go in at priority -1: a review's 200 evaluations do not hold back a
learner waiting for one evaluation created soon after them (JOBS_SCHED_PRIORITY_STEP_S).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobtypes import feynman_evaluation as feynman
from jobtypes import study_plan
from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.dependencies import DependencyPolicy
from shared.registry import ChildJobDraft, ExecutionContext, JobDefinition, JobResult

JOB_TYPE = "knowledge_base_review"
MAX_ITEMS = 200
EVALUATION_PRIORITY = -1


class ReviewItem(BaseModel):
    """One knowledge item and the learner's explanation of it (feynman_evaluation's input
    without the knowledge base, which the review names once)."""

    model_config = ConfigDict(extra="forbid")

    knowledge_item_id: str = Field(min_length=1, max_length=255)
    title: str = Field(min_length=1, max_length=500)
    content: str = Field(min_length=1, max_length=20_000)
    explanation: str = Field(min_length=1, max_length=20_000)


class KnowledgeBaseReviewInput(BaseModel):
    # The job service takes at most 256 KiB of input JSON, whatever the items' limits allow.
    model_config = ConfigDict(extra="forbid")

    knowledge_base_id: str = Field(min_length=1, max_length=255)
    items: list[ReviewItem] = Field(min_length=1, max_length=MAX_ITEMS)

    @field_validator("items")
    @classmethod
    def _each_item_once(cls, items: list[ReviewItem]) -> list[ReviewItem]:
        # two evaluations of one item would be two rows of it in the plan
        ids = [item.knowledge_item_id for item in items]
        if len(set(ids)) != len(ids):
            raise ValueError("each knowledge_item_id at most once")
        return items


class KnowledgeBaseReviewOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    knowledge_base_id: str
    items: int


def item_key(job_id: str, ordinal: int) -> str:
    # the ordinal, not the item's id: a key must be short and printable, an id need not be
    return f"kbr:{job_id}:item:{ordinal}"


def plan_key(job_id: str) -> str:
    return f"kbr:{job_id}:plan"


def children(job_id: str, review: KnowledgeBaseReviewInput) -> list[ChildJobDraft]:
    """An evaluation per item, then the plan that waits for all of them."""
    evaluations = [
        ChildJobDraft(
            job_type=feynman.JOB_TYPE,
            input={
                "knowledge_item_id": item.knowledge_item_id,
                "knowledge_base_id": review.knowledge_base_id,
                "title": item.title,
                "content": item.content,
                "explanation": item.explanation,
            },
            idempotency_key=item_key(job_id, ordinal),
            priority=EVALUATION_PRIORITY,
        )
        for ordinal, item in enumerate(review.items)
    ]
    plan = ChildJobDraft(
        job_type=study_plan.JOB_TYPE,
        input={"knowledge_base_id": review.knowledge_base_id},
        idempotency_key=plan_key(job_id),
        depends_on_keys=tuple(e.idempotency_key for e in evaluations),
        dependency_policy=DependencyPolicy.RUN,
    )
    return [*evaluations, plan]


async def execute(job_input: KnowledgeBaseReviewInput, ctx: ExecutionContext) -> JobResult:
    output = KnowledgeBaseReviewOutput(
        knowledge_base_id=job_input.knowledge_base_id, items=len(job_input.items)
    )
    ctx.report_progress(1.0)
    return JobResult(output, children=children(ctx.job_id, job_input))


DEFINITION = JobDefinition(
    job_type=JOB_TYPE,
    label="Knowledge base review",
    domain="learning",
    version="1.0.0",
    queue=Queue.BACKGROUND,
    input_model=KnowledgeBaseReviewInput,
    output_model=KnowledgeBaseReviewOutput,
    execute=execute,
    child_job_types=frozenset({feynman.JOB_TYPE, study_plan.JOB_TYPE}),
    # "every review of this knowledge base" (ListJobs' target filter)
    default_target=("knowledge_base", "input.knowledge_base_id"),
    # the children run with the review's key: the platform's or the owner's own
    credential_modes=(CredentialMode.PLATFORM, CredentialMode.USER),
    timeout_s=30.0,
    max_attempts=3,
    backoff_base_s=0.5,
    backoff_max_s=10.0,
)
