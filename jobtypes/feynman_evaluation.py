"""`feynman_evaluation`: judge a learner's explanation of a knowledge item (seed 001).

Interactive queue, primary tier. Output ``{score, summary, strengths[], weaknesses[]}``.
Its projection, committed with the job's success in one transaction: the result artifact
``fe_<jobId>``, a focus item per weakness, and exactly one ``review_card_generation``
child (idempotency key ``review-card:feynman:<jobId>``) whose input is the child snapshot
of seed 001 §4. The parent's success never depends on the child.

This module is the whole job type — models, prompt, projector, definition — registered
through the ``durable_jobs.job_types`` entry point in pyproject.toml.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobtypes import review_card_generation as cards
from jobtypes.aijob import Projection, ProjectionInput, ai_job_definition
from jobtypes.safety import DEFAULT_CHECKER
from shared.ai.prompts import PromptTemplate, register_prompt
from shared.ai.provider import ModelTier
from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.registry import AbortStrategy, ArtifactDraft, ChildJobDraft

JOB_TYPE = "feynman_evaluation"
CHILD_TITLE_CHARS = 80
FALLBACK_TITLE = "AI 分析结果"


class FeynmanInput(BaseModel):
    # Extra fields (session ids, tokens, ...) are accepted and never stored in the snapshot.
    model_config = ConfigDict(extra="ignore")

    knowledge_item_id: str = Field(min_length=1, max_length=255)
    knowledge_base_id: str = Field(min_length=1, max_length=255)
    title: str = Field(min_length=1, max_length=500)
    content: str = Field(min_length=1, max_length=20_000)
    explanation: str = Field(min_length=1, max_length=20_000)


class FeynmanOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: int = Field(ge=0, le=100)
    summary: str = Field(min_length=1, max_length=2000)
    strengths: list[str] = Field(default_factory=list, max_length=10)
    weaknesses: list[str] = Field(default_factory=list, max_length=10)


def _fake(variables: dict[str, Any]) -> dict[str, Any]:
    """A plausible evaluation, deterministic in its input: the content's key terms the
    explanation uses are strengths, the ones it misses weaknesses."""
    content = str(variables.get("content", ""))
    explanation = str(variables.get("explanation", "")).lower()
    terms = list(dict.fromkeys(w for w in re.findall(r"\w{5,}", content.lower())))[:8]
    covered = [t for t in terms if t in explanation]
    missed = [t for t in terms if t not in explanation][:3]
    score = round(100 * len(covered) / len(terms)) if terms else 50
    title = variables.get("title", "the topic")
    return {
        "score": score,
        "summary": (
            f"The explanation of {title} covers {len(covered)} of {len(terms)} key ideas"
            + (f"; it leaves out {', '.join(missed)}." if missed else ".")
        ),
        "strengths": [f"Explains {t} in own words" for t in covered[:3]],
        "weaknesses": [f"Does not explain {t}" for t in missed],
    }


PROMPT = register_prompt(
    PromptTemplate(
        key="feynman-evaluation",
        version="1.0.0",
        system=(
            "You evaluate a learner's Feynman-technique explanation of a knowledge item. "
            "Answer with one JSON object: score (integer 0-100: how completely and "
            "correctly the explanation covers the item), summary (at most 2 sentences), "
            "strengths (list of short strings), weaknesses (list of short strings, each a "
            "concept the learner missed or got wrong)."
        ),
        user=(
            "Knowledge item: {title}\n\nContent:\n{content}\n\n"
            "The learner's explanation:\n{explanation}"
        ),
        fake=_fake,
    )
)


def variables(job_input: FeynmanInput) -> dict[str, Any]:
    return {
        "title": job_input.title,
        "content": job_input.content,
        "explanation": job_input.explanation,
    }


def child_snapshot(parent: ProjectionInput) -> dict[str, Any]:
    """The review-card child's input, by the rules of seed 001 §4 (nothing else enters:
    no session or answer ids, keys, tokens, or the raw model answer)."""
    out: FeynmanOutput = parent.output
    summary = out.summary
    content = "\n".join(
        [summary]
        + [f"Strength: {s}" for s in out.strengths]
        + [f"Weakness: {w}" for w in out.weaknesses]
    )
    return {
        "userId": parent.user_id,
        "parentJobId": parent.job_id,
        "sourceResultId": result_id(parent.job_id),
        "knowledgeItemId": parent.input.knowledge_item_id,
        "knowledgeBaseId": parent.input.knowledge_base_id,
        "title": summary[:CHILD_TITLE_CHARS] or FALLBACK_TITLE,
        "summary": content,
        "strengths": list(out.strengths),
        "weaknesses": list(out.weaknesses),
        "cardCount": cards.card_count(out.weaknesses),
        "promptKey": cards.PROMPT.key,
        "promptVersion": cards.PROMPT.version,
        "modelTier": cards.MODEL_TIER.value,
        "inputSchemaVersion": cards.INPUT_SCHEMA_VERSION,
        "outputSchemaVersion": cards.OUTPUT_SCHEMA_VERSION,
    }


def result_id(job_id: str) -> str:
    return f"fe_{job_id}"


def child_idempotency_key(job_id: str) -> str:
    return f"review-card:feynman:{job_id}"


def project(parent: ProjectionInput) -> Projection:
    out: FeynmanOutput = parent.output
    source = result_id(parent.job_id)
    result = ArtifactDraft(
        artifact_type="feynman_result",
        artifact_id=source,
        payload={
            "knowledgeItemId": parent.input.knowledge_item_id,
            "knowledgeBaseId": parent.input.knowledge_base_id,
            **out.model_dump(mode="json"),
        },
    )
    focus_items = [
        ArtifactDraft(
            artifact_type="focus_item",
            artifact_id=f"fi_{parent.job_id}_{ordinal}",
            ordinal=ordinal,
            payload={
                "knowledgeItemId": parent.input.knowledge_item_id,
                "sourceResultId": source,
                "weakness": weakness,
            },
        )
        for ordinal, weakness in enumerate(out.weaknesses)
    ]
    child = ChildJobDraft(
        job_type=cards.JOB_TYPE,
        input=child_snapshot(parent),
        idempotency_key=child_idempotency_key(parent.job_id),
    )
    return Projection(artifacts=[result, *focus_items], children=[child])


DEFINITION = ai_job_definition(
    job_type=JOB_TYPE,
    label="Feynman evaluation",
    domain="learning",
    version="1.0.0",
    queue=Queue.INTERACTIVE,
    input_model=FeynmanInput,
    output_model=FeynmanOutput,
    prompt=PROMPT,
    model_tier=ModelTier.PRIMARY,
    variables=variables,
    projector=project,
    content_safety=DEFAULT_CHECKER,
    snapshot_fields=frozenset(FeynmanInput.model_fields),
    # "every evaluation of this knowledge item" (ListJobs' target filter)
    default_target=("knowledge_item", "input.knowledge_item_id"),
    child_job_types=frozenset({cards.JOB_TYPE}),
    # the platform key, or the owner's own (a child runs with its parent's)
    credential_modes=(CredentialMode.PLATFORM, CredentialMode.USER),
    timeout_s=60.0,
    max_attempts=3,
    backoff_base_s=1.0,
    backoff_max_s=30.0,
    abort_strategy=AbortStrategy.RETRY,
    concurrency=32,
)
