"""review_card_generation's business validation, rule by rule as seed 001 §5.2 freezes it,
and the card count of seed 001 §1.4."""

from __future__ import annotations

from typing import Any

import pytest

from jobtypes.review_card_generation import (
    ReviewCardInput,
    ReviewCardOutput,
    card_count,
    validate_cards,
)
from shared.errors import ExecutionError, classify


def job_input(count: int = 2) -> ReviewCardInput:
    return ReviewCardInput(
        userId="u",
        parentJobId="p",
        sourceResultId="fe_p",
        knowledgeItemId="ki",
        knowledgeBaseId="kb",
        title="t",
        summary="s",
        cardCount=count,
    )


def card(front: str = "What is X?", back: str = "X is Y.", **extra: Any) -> dict[str, Any]:
    return {"frontText": front, "backText": back, "difficulty": "easy", "tags": [], **extra}


def answer(*cards: dict[str, Any], total: int | None = None) -> dict[str, Any]:
    return {"cards": list(cards), "totalCount": len(cards) if total is None else total}


def rejected(raw: dict[str, Any], count: int = 2) -> str:
    with pytest.raises(ExecutionError) as raised:
        validate_cards(raw, job_input(count))
    assert raised.value.code == "VALIDATION_OUTPUT_REJECTED"
    assert classify(raised.value.code).value == "VALIDATION"
    return raised.value.detail


@pytest.mark.parametrize(("weaknesses", "count"), [(0, 1), (1, 1), (2, 2), (3, 3), (7, 3)])
def test_card_count_is_min_3_max_1_weaknesses(weaknesses: int, count: int) -> None:
    assert card_count(["w"] * weaknesses) == count


def test_a_good_answer_passes_unchanged_and_fits_the_output_model() -> None:
    raw = answer(card("Q1", "A1"), card("Q2", "A2", difficulty="hard", tags=["bio"]))

    result = validate_cards(raw, job_input(2))

    assert result == raw
    assert ReviewCardOutput.model_validate(result).totalCount == 2


def test_p0_no_cards_is_rejected() -> None:
    assert rejected(answer()) == "no cards"
    assert rejected({"totalCount": 0}) == "no cards"


def test_p0_more_than_20_cards_is_rejected() -> None:
    cards = [card(f"Q{i}", f"A{i}") for i in range(21)]
    assert "more than 20" in rejected(answer(*cards))


def test_p1_total_count_must_match_the_cards() -> None:
    assert "totalCount" in rejected(answer(card(), total=3))


def test_p0_an_empty_card_is_rejected() -> None:
    assert rejected(answer(card("Q", "A"), card("", "  "))) == "an empty card"


@pytest.mark.parametrize(
    ("front", "back"),
    [("请分析这段内容", "A"), ("Q", "根据上文答案是 X"), ("As an AI, I think", "A")],
)
def test_p0_instruction_text_is_rejected(front: str, back: str) -> None:
    assert "instruction" in rejected(answer(card(front, back), card("Q2", "A2")))


def test_p0_markdown_code_fences_are_rejected() -> None:
    assert "code fence" in rejected(answer(card("Q", '```json\n{"a": 1}\n```'), card()))


def test_p0_oversized_text_is_rejected() -> None:
    assert "oversized" in rejected(answer(card("Q" * 2001, "A"), card()))
    assert "oversized" in rejected(answer(card("Q", "A" * 5001), card()))


def test_p0_a_card_over_the_field_limits_is_dropped_not_the_answer() -> None:
    raw = answer(card("Q" * 501, "A"), card("Q2", "A" * 1001), card("Q3", "A3"), card("Q4", "A4"))

    result = validate_cards(raw, job_input(2))

    assert [c["frontText"] for c in result["cards"]] == ["Q3", "Q4"]
    assert result["totalCount"] == 2


def test_p1_an_unknown_difficulty_defaults_to_medium() -> None:
    result = validate_cards(answer(card(difficulty="impossible"), card("Q2", "A2")), job_input())

    assert [c["difficulty"] for c in result["cards"]] == ["medium", "easy"]


def test_p1_exact_duplicates_are_removed() -> None:
    result = validate_cards(answer(card("Q", "A"), card("Q", "A"), card("Q", "B")), job_input())

    assert [(c["frontText"], c["backText"]) for c in result["cards"]] == [("Q", "A"), ("Q", "B")]


def test_p2_a_count_within_one_of_card_count_is_kept() -> None:
    three = answer(card("Q1", "A1"), card("Q2", "A2"), card("Q3", "A3"))
    assert validate_cards(three, job_input(2))["totalCount"] == 3
    assert validate_cards(answer(card()), job_input(2))["totalCount"] == 1


def test_p2_a_surplus_beyond_the_range_is_trimmed_to_card_count() -> None:
    five = answer(*(card(f"Q{i}", f"A{i}") for i in range(5)))

    result = validate_cards(five, job_input(2))

    assert [c["frontText"] for c in result["cards"]] == ["Q0", "Q1"]
    assert result["totalCount"] == 2


def test_p2_too_few_usable_cards_is_rejected() -> None:
    assert "usable cards" in rejected(answer(card()), count=3)


def test_tags_are_bounded_and_whitespace_is_trimmed() -> None:
    tags = ["a", " b ", "x" * 51, "c", "d", "e", "f"]
    result = validate_cards(answer(card("  Q  ", " A ", tags=tags)), job_input(1))

    [only] = result["cards"]
    assert (only["frontText"], only["backText"]) == ("Q", "A")
    assert only["tags"] == ["a", "b", "c", "d", "e"]
