"""`review_card_generation`: review cards from a Feynman evaluation (seed 001 §4, §5, §10).

Background queue, cheap tier, prompt ``review-card-generation`` 1.0.0. Created as the
child of a ``feynman_evaluation`` (its input is the child snapshot), never needed for the
parent's success. Output ``{cards[{frontText, backText, difficulty, tags}], totalCount}``
after the business validation of seed 001 §5.2 (``validate_cards``); each card becomes a
``review_card`` artifact ``rc_<jobId>_<ordinal>`` — unique by (job, ordinal), so a repeated
projection cannot add cards — with the review-scheduling defaults of seed 001 §10.1.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobtypes.aijob import Projection, ProjectionInput, ai_job_definition
from shared.ai.prompts import PromptTemplate, register_prompt
from shared.ai.provider import ModelTier
from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.errors import ErrorCode, ExecutionError
from shared.registry import AbortStrategy, ArtifactDraft

JOB_TYPE = "review_card_generation"
INPUT_SCHEMA_VERSION = "1.0.0"
OUTPUT_SCHEMA_VERSION = "1.0.0"
MODEL_TIER = ModelTier.CHEAP

MAX_CARDS = 20
MAX_FRONT, MAX_BACK = 500, 1000
# Beyond these a card is not merely dropped: the whole answer is rejected.
OVERSIZED_FRONT, OVERSIZED_BACK = 2000, 5000
MAX_TAGS, MAX_TAG_CHARS = 5, 50
DIFFICULTIES = ("easy", "medium", "hard")
# Text that is the model talking about its instructions, not a card.
INSTRUCTION_TEXT = re.compile(
    r"请分析|根据上文|根据以上|作为一个?\s*AI|as an ai\b|based on the (above|text above)|"
    r"please analy[sz]e|ignore (all )?previous instructions",
    re.IGNORECASE,
)
CODE_FENCE = re.compile(r"```")

# Review-scheduling defaults of a new card (seed 001 §10.1).
SCHEDULING_DEFAULTS: dict[str, Any] = {
    "status": "active",
    "intervalDays": 1,
    "easeFactor": 2.5,
    "repetitionCount": 0,
    "lapseCount": 0,
    "scheduleState": "new",
}


def card_count(weaknesses: list[str]) -> int:
    """min(3, max(1, len(weaknesses))): 1 card without weaknesses, at most 3."""
    return min(3, max(1, len(weaknesses)))


class ReviewCardInput(BaseModel):
    """The child snapshot of seed 001 §4.1 (camelCase as frozen there)."""

    model_config = ConfigDict(extra="forbid")

    userId: str = Field(min_length=1, max_length=255)
    parentJobId: str = Field(min_length=1, max_length=255)
    sourceResultId: str = Field(min_length=1, max_length=255)
    knowledgeItemId: str = Field(min_length=1, max_length=255)
    knowledgeBaseId: str = Field(min_length=1, max_length=255)
    title: str = Field(min_length=1, max_length=80)
    summary: str = Field(min_length=1, max_length=40_000)
    strengths: list[str] = Field(default_factory=list, max_length=50)
    weaknesses: list[str] = Field(default_factory=list, max_length=50)
    cardCount: int = Field(ge=1, le=3)
    promptKey: Literal["review-card-generation"] = "review-card-generation"
    promptVersion: Literal["1.0.0"] = "1.0.0"
    modelTier: Literal["cheap"] = "cheap"
    inputSchemaVersion: str = INPUT_SCHEMA_VERSION
    outputSchemaVersion: str = OUTPUT_SCHEMA_VERSION


class Card(BaseModel):
    model_config = ConfigDict(extra="forbid")

    frontText: str = Field(min_length=1, max_length=MAX_FRONT)
    backText: str = Field(min_length=1, max_length=MAX_BACK)
    difficulty: Literal["easy", "medium", "hard"]
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)


class ReviewCardOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cards: list[Card] = Field(min_length=1, max_length=MAX_CARDS)
    totalCount: int = Field(ge=1, le=MAX_CARDS)


def _reject(reason: str) -> ExecutionError:
    return ExecutionError(ErrorCode.VALIDATION_OUTPUT_REJECTED, reason)


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def validate_cards(raw: dict[str, Any], job_input: ReviewCardInput) -> dict[str, Any]:
    """Seed 001 §5.2, rule by rule: reject the answer (P0/P1 answer rules), drop a bad
    card, default a bad difficulty, de-duplicate, and trim a surplus to ``cardCount``."""
    cards = raw.get("cards")
    if not isinstance(cards, list) or not cards:
        raise _reject("no cards")
    if len(cards) > MAX_CARDS:
        raise _reject(f"more than {MAX_CARDS} cards")
    if raw.get("totalCount") != len(cards):
        raise _reject("totalCount does not match the cards")
    kept: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for card in cards:
        if not isinstance(card, dict):
            raise _reject("a card is not an object")
        front, back = _text(card.get("frontText")), _text(card.get("backText"))
        if not front and not back:
            raise _reject("an empty card")
        if len(front) > OVERSIZED_FRONT or len(back) > OVERSIZED_BACK:
            raise _reject("an oversized card")
        if INSTRUCTION_TEXT.search(front) or INSTRUCTION_TEXT.search(back):
            raise _reject("a card holds instruction text")
        if CODE_FENCE.search(front) or CODE_FENCE.search(back):
            raise _reject("a card holds a code fence")
        if not front or len(front) > MAX_FRONT or not back or len(back) > MAX_BACK:
            continue  # this card is rejected, the others stand
        if (front, back) in seen:
            continue  # an exact duplicate
        seen.add((front, back))
        difficulty = card.get("difficulty")
        raw_tags = card.get("tags")
        tags = [t.strip() for t in raw_tags or [] if isinstance(t, str) and t.strip()]
        if not isinstance(raw_tags, list):
            tags = []
        kept.append(
            {
                "frontText": front,
                "backText": back,
                "difficulty": difficulty if difficulty in DIFFICULTIES else "medium",
                "tags": [t for t in tags if len(t) <= MAX_TAG_CHARS][:MAX_TAGS],
            }
        )
    wanted = job_input.cardCount
    if len(kept) < max(1, wanted - 1):
        raise _reject(f"{len(kept)} usable cards for {wanted} wanted")
    if len(kept) > wanted + 1:
        kept = kept[:wanted]  # beyond the allowed range: trimmed to the count asked for
    return {"cards": kept, "totalCount": len(kept)}


def _fake(variables: dict[str, Any]) -> dict[str, Any]:
    count = int(variables.get("cardCount") or 1)
    topics = list(variables.get("weaknesses") or []) or [str(variables.get("title", "the topic"))]
    cards = [
        {
            "frontText": f"Question {i + 1}: {topics[i % len(topics)]}?",
            "backText": f"Review: {topics[i % len(topics)]}. Context: {variables.get('title', '')}",
            "difficulty": DIFFICULTIES[i % len(DIFFICULTIES)],
            "tags": ["review", "feynman"],
        }
        for i in range(count)
    ]
    return {"cards": cards, "totalCount": count}


PROMPT = register_prompt(
    PromptTemplate(
        key="review-card-generation",
        version="1.0.0",
        system=(
            "You write spaced-repetition review cards. Answer with one JSON object: cards "
            "(a list of objects with frontText (a question, at most 500 characters), "
            "backText (the answer, at most 1000 characters), difficulty (easy, medium or "
            "hard) and tags (at most 5 short strings)) and totalCount (the number of cards). "
            "Write plain text: no markdown, no code fences."
        ),
        user=(
            "Knowledge item: {title}\n\nEvaluation:\n{summary}\n\n"
            "Write exactly {cardCount} card(s), one per weakness first."
        ),
        fake=_fake,
    )
)


def variables(job_input: ReviewCardInput) -> dict[str, Any]:
    return {
        "title": job_input.title,
        "summary": job_input.summary,
        "weaknesses": job_input.weaknesses,
        "cardCount": job_input.cardCount,
    }


def project(job: ProjectionInput) -> Projection:
    out: ReviewCardOutput = job.output
    source: ReviewCardInput = job.input
    next_review_at = datetime.now(UTC).isoformat()
    return Projection(
        artifacts=[
            ArtifactDraft(
                artifact_type="review_card",
                artifact_id=f"rc_{job.job_id}_{ordinal}",
                ordinal=ordinal,
                payload={
                    **card.model_dump(mode="json"),
                    "userId": source.userId,
                    "knowledgeItemId": source.knowledgeItemId,
                    "parentJobId": source.parentJobId,
                    "sourceResultId": source.sourceResultId,
                    **SCHEDULING_DEFAULTS,
                    "nextReviewAt": next_review_at,
                },
            )
            for ordinal, card in enumerate(out.cards)
        ]
    )


DEFINITION = ai_job_definition(
    job_type=JOB_TYPE,
    label="Review card generation",
    domain="learning",
    version="1.0.0",
    queue=Queue.BACKGROUND,
    input_model=ReviewCardInput,
    output_model=ReviewCardOutput,
    prompt=PROMPT,
    model_tier=MODEL_TIER,
    variables=variables,
    validator=validate_cards,
    projector=project,
    input_schema_version=INPUT_SCHEMA_VERSION,
    # the platform key, or the owner's own (a child runs with its parent's)
    credential_modes=(CredentialMode.PLATFORM, CredentialMode.USER),
    output_schema_version=OUTPUT_SCHEMA_VERSION,
    timeout_s=120.0,
    max_attempts=3,
    backoff_base_s=2.0,
    backoff_max_s=60.0,
    abort_strategy=AbortStrategy.RETRY,
    concurrency=16,
)
