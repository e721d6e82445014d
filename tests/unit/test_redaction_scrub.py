"""The redaction rule on what a projection builds from a redacting job's output: every copy
of a redacted field's value in an artifact's payload or a child's input is stored as the
job row stores the field, and nothing else changes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from shared.canonical import content_hash
from shared.redaction import scrubbed
from shared.registry import JobDefinition, JobResult


class Out(BaseModel):
    summary: str
    score: int
    tags: list[str]


async def _run(job_input: Any, ctx: Any) -> JobResult:  # never run
    raise NotImplementedError


DEFINITION = JobDefinition(
    job_type="private",
    label="Private",
    domain="testing",
    version="1",
    queue="ai-interactive",
    input_model=Out,
    output_model=Out,
    execute=_run,
    output_redaction=frozenset({"summary", "score", "tags"}),
)
OUTPUT = {"summary": "the secret summary text", "score": 3, "tags": ["a", "b"]}


def mark(value: Any) -> str:
    return f"sha256:{content_hash(value)}"


def test_a_copy_of_the_whole_output_keeps_no_redacted_value() -> None:
    payload = {"result": dict(OUTPUT), "kept": 3, "other": "unrelated"}
    assert scrubbed(DEFINITION, OUTPUT, payload) == {
        "result": {
            "summary": mark(OUTPUT["summary"]),
            "score": mark(3),
            "tags": mark(["a", "b"]),
        },
        "kept": 3,  # a short scalar under another name is not the field's copy
        "other": "unrelated",
    }


def test_a_quoted_text_and_a_copy_under_another_name_are_replaced() -> None:
    child_input = {"text": "Summary: the secret summary text.", "about": "the secret summary text"}
    assert scrubbed(DEFINITION, OUTPUT, child_input) == {
        "text": f"Summary: {mark(OUTPUT['summary'])}.",
        "about": mark(OUTPUT["summary"]),
    }


def test_a_type_that_redacts_nothing_is_left_alone() -> None:
    plain = JobDefinition(**{**DEFINITION.__dict__, "output_redaction": frozenset()})
    assert scrubbed(plain, OUTPUT, {"result": dict(OUTPUT)}) == {"result": OUTPUT}
