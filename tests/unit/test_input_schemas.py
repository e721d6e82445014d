"""A job's input checked against its type's declared JSON Schema (issue 41) names the bad
fields the way the pydantic path does today: the same dotted paths for the shipped types'
rendered schemas, and the known differences pinned here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from job_service.domain.input_schemas import CompiledSchema, SchemaError
from shared.errors import InvalidInput
from shared.job_type_specs import spec_of
from shared.registry import default_registry

FEYNMAN = {
    "knowledge_item_id": "ki_1",
    "knowledge_base_id": "kb_1",
    "title": "Photosynthesis",
    "content": "Light becomes sugar.",
    "explanation": "Plants eat light.",
}
ITEM = {k: v for k, v in FEYNMAN.items() if k != "knowledge_base_id"}
REVIEW: dict[str, Any] = {
    "knowledge_base_id": "kb_1",
    "items": [ITEM, ITEM | {"knowledge_item_id": "ki_2"}],
}
CARD_INPUT = {
    "userId": "u_1",
    "parentJobId": "job_1",
    "sourceResultId": "fe_job_1",
    "knowledgeItemId": "ki_1",
    "knowledgeBaseId": "kb_1",
    "title": "Photosynthesis",
    "summary": "Light becomes sugar.",
    "cardCount": 2,
}


def _without(data: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != name}


def _item(n: int, **changes: Any) -> dict[str, Any]:
    items = [dict(item) for item in REVIEW["items"]]
    items[n].update(changes)
    return REVIEW | {"items": items}


VALID = [
    ("feynman_evaluation", FEYNMAN),
    ("feynman_evaluation", FEYNMAN | {"session_token": "extra fields are ignored"}),
    ("knowledge_base_review", REVIEW),
    ("review_card_generation", CARD_INPUT | {"strengths": ["a"], "weaknesses": []}),
    ("study_plan", {"knowledge_base_id": "kb_1"}),
    ("synthetic", {}),
    ("synthetic", {"sleep_ms": 5, "fail": "retryable", "fail_times": 2}),
    ("synthetic", {"sleep_ms": 5.0, "wait_signals": ["approve", "go:now"]}),
]

# (job type, input, the fields both paths name)
BAD = [
    ("feynman_evaluation", _without(FEYNMAN, "explanation"), ["input.explanation"]),
    ("feynman_evaluation", {}, [f"input.{name}" for name in FEYNMAN]),
    ("feynman_evaluation", FEYNMAN | {"title": 5}, ["input.title"]),
    ("feynman_evaluation", FEYNMAN | {"title": None}, ["input.title"]),
    ("feynman_evaluation", FEYNMAN | {"title": "x" * 501}, ["input.title"]),
    ("feynman_evaluation", FEYNMAN | {"content": ""}, ["input.content"]),
    ("knowledge_base_review", REVIEW | {"surprise": 1}, ["input.surprise"]),
    ("knowledge_base_review", REVIEW | {"items": []}, ["input.items"]),
    ("knowledge_base_review", REVIEW | {"items": "none"}, ["input.items"]),
    ("knowledge_base_review", REVIEW | {"items": [ITEM] * 201}, ["input.items"]),
    ("knowledge_base_review", REVIEW | {"items": [5]}, ["input.items.0"]),
    ("knowledge_base_review", _item(1, title=""), ["input.items.1.title"]),
    ("knowledge_base_review", _item(0, note="x"), ["input.items.0.note"]),
    ("knowledge_base_review", _item(1, explanation=None), ["input.items.1.explanation"]),
    (
        "knowledge_base_review",
        {"items": [_without(ITEM, "content")]},
        ["input.knowledge_base_id", "input.items.0.content"],
    ),
    ("review_card_generation", CARD_INPUT | {"cardCount": 0}, ["input.cardCount"]),
    ("review_card_generation", CARD_INPUT | {"cardCount": 4}, ["input.cardCount"]),
    ("review_card_generation", CARD_INPUT | {"strengths": [1]}, ["input.strengths.0"]),
    ("review_card_generation", CARD_INPUT | {"weaknesses": ["w"] * 51}, ["input.weaknesses"]),
    ("study_plan", {"knowledge_base_id": "kb", "extra": True}, ["input.extra"]),
    ("synthetic", {"sleep_ms": -1}, ["input.sleep_ms"]),
    ("synthetic", {"sleep_ms": 1.5}, ["input.sleep_ms"]),
    ("synthetic", {"fail": "sometimes"}, ["input.fail"]),
    ("synthetic", {"output_bytes": 10**9}, ["input.output_bytes"]),
    ("synthetic", {"wait_signals": ["no spaces"]}, ["input.wait_signals.0"]),
    ("synthetic", {"a": 1, "b": 2}, ["input.a", "input.b"]),
]


def compiled(job_type: str) -> CompiledSchema:
    spec = spec_of(default_registry({}).get(job_type))
    return CompiledSchema(json.loads(spec.input_schema_json))


def pydantic_fields(job_type: str, raw: dict[str, Any]) -> list[str]:
    try:
        default_registry({}).get(job_type).validate_input(raw)
    except InvalidInput as exc:
        return [v.field for v in exc.violations]
    return []


@pytest.mark.parametrize(("job_type", "raw"), VALID)
def test_valid_inputs_are_accepted_by_both(job_type: str, raw: dict[str, Any]) -> None:
    assert pydantic_fields(job_type, raw) == []
    assert compiled(job_type).problems(raw, "input") == []


@pytest.mark.parametrize(("job_type", "raw", "fields"), BAD)
def test_bad_inputs_name_the_fields_pydantic_names(
    job_type: str, raw: dict[str, Any], fields: list[str]
) -> None:
    problems = compiled(job_type).problems(raw, "input")
    assert sorted(p.field for p in problems) == sorted(fields)
    assert sorted(pydantic_fields(job_type, raw)) == sorted(fields)


@pytest.mark.parametrize(
    ("raw", "description"),
    [
        (_without(FEYNMAN, "title"), "Field required"),
        (FEYNMAN | {"title": 5}, "Input should be a valid string"),
        (FEYNMAN | {"title": ""}, "String should have at least 1 character"),
        (FEYNMAN | {"title": "x" * 501}, "String should have at most 500 characters"),
    ],
)
def test_descriptions_are_pydantics_words(raw: dict[str, Any], description: str) -> None:
    [problem] = compiled("feynman_evaluation").problems(raw, "input")
    assert problem.description == description
    with pytest.raises(InvalidInput) as refused:
        default_registry({}).get("feynman_evaluation").validate_input(raw)
    assert [v.description for v in refused.value.violations] == [description]


def test_descriptions_of_other_kinds_say_what_the_schema_asks() -> None:
    schema = compiled("synthetic")
    [below] = schema.problems({"sleep_ms": -1}, "input")
    [choice] = schema.problems({"fail": "sometimes"}, "input")
    [extra] = schema.problems({"zz": 1}, "input")
    assert below.description == "Input should be greater than or equal to 0"
    assert choice.description == "Input should be 'none', 'retryable', 'fatal' or 'hang'"
    assert extra.description == "Extra inputs are not permitted"
    [short] = compiled("knowledge_base_review").problems(REVIEW | {"items": []}, "input")
    assert short.description == "List should have at least 1 item"


def test_a_rejected_value_is_never_quoted() -> None:
    secret = "sk-live-" + "s" * 600
    problems = compiled("feynman_evaluation").problems(FEYNMAN | {"title": secret}, "input")
    assert problems and all("sk-live" not in p.description for p in problems)


def test_the_prefix_names_the_root() -> None:
    schema = CompiledSchema({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert [p.field for p in schema.problems({"a": "x"}, "output")] == ["output.a"]
    assert [p.field for p in schema.problems([], "output")] == ["output"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"properties": []},
        {"minLength": -1},
        {"$ref": "#/$defs/Missing"},
        # never fetched: the job service reads no schema from the network
        {"$ref": "https://example.com/schema.json"},
    ],
)
def test_a_broken_schema_does_not_compile(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        CompiledSchema(schema)


# The known differences from the pydantic path, pinned so that a change shows.


def test_lax_coercions_pydantic_allows_are_refused() -> None:
    # pydantic's lax mode takes "5" and true for an integer; the schema says integer
    for raw in ({"sleep_ms": "5"}, {"sleep_ms": True}):
        assert pydantic_fields("synthetic", raw) == []
        assert [p.field for p in compiled("synthetic").problems(raw, "input")] == ["input.sleep_ms"]


def test_a_model_validator_beyond_the_schema_is_not_checked() -> None:
    # knowledge_base_review's field_validator (each item once) has no JSON Schema form
    twice = REVIEW | {"items": [ITEM, ITEM]}
    assert pydantic_fields("knowledge_base_review", twice) == ["input.items"]
    assert compiled("knowledge_base_review").problems(twice, "input") == []
