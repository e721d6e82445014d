"""Job definitions (DESIGN §4): validated at registration, input validated at CreateJob."""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from job_service.domain.job_types import JobType
from jobtypes import synthetic
from jobtypes.synthetic import FailMode, SyntheticInput
from shared.constants import Queue
from shared.errors import FieldViolation, InvalidInput, Reason, UnknownJobType
from shared.registry import (
    DefinitionError,
    JobDefinition,
    JobResult,
    Registry,
    default_registry,
)
from tests.support.declared import job_types_of


class _Output(BaseModel):
    ok: bool = True


async def _execute(job_input: Any, ctx: Any) -> JobResult:  # never called here
    return JobResult(output=_Output())


def definition(**changes: Any) -> JobDefinition:
    base = JobDefinition(
        job_type="throwaway",
        label="Throwaway",
        domain="testing",
        version="1",
        queue=Queue.BACKGROUND,
        input_model=SyntheticInput,
        output_model=_Output,
        execute=_execute,
    )
    return dataclasses.replace(base, **changes)


def rejected(d: JobDefinition, registry: Registry | None = None) -> str:
    registry = registry if registry is not None else Registry()
    with pytest.raises(DefinitionError) as info:
        registry.register(d)
    return str(info.value)


# --- registration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "job_type", ["ab", "a" * 64, "a1", "a_", "feynman_evaluation", "review_card_generation"]
)
def test_good_type_names_register(job_type: str) -> None:
    registry = Registry()
    registry.register(definition(job_type=job_type))
    assert registry.get(job_type).job_type == job_type


@pytest.mark.parametrize(
    "job_type",
    [
        "",
        "a",  # one character: the pattern asks for two at least
        "a" * 65,
        "1abc",
        "_abc",
        "Abc",
        "abC",
        "ab-c",
        "ab.c",  # would split a NATS subject jobs.events.<job_type>.<status>
        "ab c",
        "ab*",
        "ab>",
        "é_type",
        " abc",
        "abc ",
    ],
)
def test_bad_type_names_are_rejected_with_the_pattern(job_type: str) -> None:
    message = rejected(definition(job_type=job_type))
    assert repr(job_type) in message
    assert "^[a-z][a-z0-9_]{1,63}$" in message


def test_type_name_with_a_trailing_newline_is_rejected() -> None:
    # `re.match` with `$` also matches just before a final "\n": "abc\n" slips through
    # JOB_TYPE_PATTERN.match and would land in subjects and database rows.
    message = rejected(definition(job_type="abc\n"))
    assert "^[a-z][a-z0-9_]{1,63}$" in message


@pytest.mark.parametrize("queue", ["", "ai-other", "AI-INTERACTIVE", "ai_interactive", "default"])
def test_unknown_queues_are_rejected(queue: str) -> None:
    message = rejected(definition(queue=queue))
    assert f"unknown queue {queue!r}" in message


@pytest.mark.parametrize("queue", ["ai-interactive", "ai-background", *Queue])
def test_known_queues_register(queue: str) -> None:
    registry = Registry([definition(queue=queue)])
    assert registry.get("throwaway").queue == queue


@pytest.mark.parametrize("timeout_s", [1.0, 1, 30.5, 600, 600.0])
def test_timeouts_between_one_second_and_ten_minutes_register(timeout_s: float) -> None:
    Registry([definition(timeout_s=timeout_s)])


@pytest.mark.parametrize(
    "timeout_s", [0.0, 0.999, -1.0, 600.001, 3600.0, float("inf"), float("nan")]
)
def test_timeouts_outside_one_to_six_hundred_seconds_are_rejected(timeout_s: float) -> None:
    message = rejected(definition(timeout_s=timeout_s))
    assert "timeout" in message
    assert "outside 1.0-600.0s" in message


def test_duplicate_types_are_rejected_and_the_first_stays() -> None:
    registry = Registry()
    first = definition(label="first")
    registry.register(first)
    message = rejected(definition(label="second"), registry)
    assert message == "job type 'throwaway' is already registered"
    assert registry.get("throwaway") is first
    assert [d.label for d in registry] == ["first"]


def test_duplicate_types_in_the_constructor_are_rejected() -> None:
    with pytest.raises(DefinitionError, match="already registered"):
        Registry([definition(), definition()])


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"max_attempts": 0}, "max_attempts must be within 1..100"),
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"backoff_base_s": 0.0}, "backoff must satisfy 0 < base <= max"),
        ({"backoff_base_s": 10.0, "backoff_max_s": 1.0}, "backoff must satisfy 0 < base <= max"),
        ({"credential_modes": ()}, "credential_modes must name at least one CredentialMode"),
        ({"credential_modes": ("user",)}, "credential_modes must name at least one"),
    ],
)
def test_other_bad_execution_settings_are_rejected(changes: dict[str, Any], fragment: str) -> None:
    assert fragment in rejected(definition(**changes))


def test_every_problem_of_a_definition_is_reported_at_once() -> None:
    registry = Registry()
    message = rejected(definition(job_type="Bad", queue="nowhere", timeout_s=0), registry)
    assert "'Bad'" in message
    assert "unknown queue 'nowhere'" in message
    assert "timeout 0s" in message
    assert list(registry) == []


# --- lookup ----------------------------------------------------------------------------


@pytest.mark.parametrize("job_type", ["nope", "", "Synthetic", "synthetic "])
def test_get_of_an_unknown_type_raises_unknown_job_type_on_the_job_type_field(
    job_type: str,
) -> None:
    registry = default_registry()
    with pytest.raises(UnknownJobType) as info:
        registry.get(job_type)
    error = info.value
    assert isinstance(error, InvalidInput)  # INVALID_ARGUMENT, like any bad input
    assert error.reason is Reason.UNKNOWN_JOB_TYPE
    assert repr(job_type) in error.message
    assert [v.field for v in error.violations] == ["job_type"]
    assert error.violations[0].description


def test_default_registry_ships_synthetic_and_the_plugged_in_reference_types() -> None:
    registry = default_registry({})
    assert registry.get("synthetic") is synthetic.DEFINITION
    # the other shipped types come through the entry-point group
    assert sorted(d.job_type for d in registry) == [
        "approval_agent",
        "feynman_evaluation",
        "knowledge_base_review",
        "review_card_generation",
        "study_plan",
        "synthetic",
    ]


def test_job_type_modules_can_be_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("team_jobtypes_probe")
    module.DEFINITION = definition(job_type="team_probe")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "team_jobtypes_probe", module)

    registry = default_registry({"JOBS_JOB_TYPE_MODULES": "team_jobtypes_probe"})

    assert registry.get("team_probe") is module.DEFINITION


def test_a_configured_module_without_definitions_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "team_empty_probe", types.ModuleType("team_empty_probe"))
    with pytest.raises(DefinitionError, match="exports no DEFINITION"):
        default_registry({"JOBS_JOB_TYPE_MODULES": "team_empty_probe"})


# --- synthetic input -------------------------------------------------------------------


def test_synthetic_input_defaults() -> None:
    validated = synthetic.DEFINITION.validate_input({})
    assert isinstance(validated, SyntheticInput)
    assert validated.sleep_ms == 0
    assert validated.fail is FailMode.NONE
    assert validated.fail_times == 0
    assert validated.output_bytes == 16


def test_synthetic_input_accepts_good_values() -> None:
    validated = synthetic.DEFINITION.validate_input(
        {
            "sleep_ms": 600_000,
            "fail": "retryable",
            "fail_times": 2,
            "output_bytes": 0,
            "wait_signals": ["approve", "edit.v2"],
            "signal_timeout_ms": 5,
        }
    )
    assert validated.model_dump() == {
        "sleep_ms": 600_000,
        "fail": FailMode.RETRYABLE,
        "fail_times": 2,
        "output_bytes": 0,
        "wait_signals": ["approve", "edit.v2"],
        "signal_timeout_ms": 5,
    }


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"sleep_ms": -1}, "input.sleep_ms"),
        ({"sleep_ms": 600_001}, "input.sleep_ms"),
        ({"sleep_ms": "soon"}, "input.sleep_ms"),
        ({"sleep_ms": 1.5}, "input.sleep_ms"),
        ({"fail": "explode"}, "input.fail"),
        ({"fail_times": 101}, "input.fail_times"),
        ({"wait_signals": ["no spaces"]}, "input.wait_signals.0"),
        ({"wait_signals": ["a"] * 21}, "input.wait_signals"),
        ({"output_bytes": 1_000_001}, "input.output_bytes"),
        ({"bogus": 1}, "input.bogus"),
    ],
)
def test_synthetic_bad_input_names_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        synthetic.DEFINITION.validate_input(raw)
    error = info.value
    assert type(error) is InvalidInput
    assert error.reason is Reason.INVALID_INPUT
    assert "synthetic" in error.message
    assert [v.field for v in error.violations] == [field]
    assert all(v.description for v in error.violations)


def test_synthetic_bad_input_names_every_bad_field() -> None:
    with pytest.raises(InvalidInput) as info:
        synthetic.DEFINITION.validate_input({"sleep_ms": -1, "fail": "explode", "extra": True})
    assert sorted(v.field for v in info.value.violations) == [
        "input.extra",
        "input.fail",
        "input.sleep_ms",
    ]


def test_extra_field_is_rejected_with_a_clear_description() -> None:
    with pytest.raises(InvalidInput) as info:
        synthetic.DEFINITION.validate_input({"bogus": 1})
    assert info.value.violations == [
        FieldViolation("input.bogus", "Extra inputs are not permitted")
    ]


# --- snapshot --------------------------------------------------------------------------


class _Inner(BaseModel):
    note: str


class _WithSecret(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str
    api_key: str = Field(json_schema_extra={"secret": True})
    count: int = 1
    mode: FailMode = FailMode.NONE
    inner: _Inner | None = None
    public_hint: str = Field(default="h", json_schema_extra={"secret": False})


def declared(d: JobDefinition) -> JobType:
    """The definition as the job service knows it: declared by a worker (the snapshot is
    the job service's to make, from the spec)."""
    return job_types_of([d]).get(d.job_type)


def test_snapshot_drops_fields_marked_secret() -> None:
    d = declared(definition(input_model=_WithSecret))
    validated = d.validate_input(
        {"prompt": "hi", "api_key": "sk-live-123", "count": 2, "inner": {"note": "n"}}
    )
    snap = d.snapshot(validated)
    assert snap == {
        "prompt": "hi",
        "count": 2,
        "mode": "none",  # JSON form: enums become their values
        "inner": {"note": "n"},
        "public_hint": "h",
    }
    assert "sk-live-123" not in repr(snap)


def test_withheld_fields_name_what_a_snapshot_never_holds() -> None:
    marked = definition(input_model=_WithSecret)
    assert marked.withheld_fields() == ("api_key",)
    allow_listed = definition(input_model=_WithSecret, snapshot_fields=frozenset({"prompt"}))
    assert allow_listed.withheld_fields() == ("api_key", "count", "mode", "inner", "public_hint")
    assert synthetic.DEFINITION.withheld_fields() == ()


def test_snapshot_keeps_every_field_when_none_is_secret() -> None:
    d = declared(synthetic.DEFINITION)
    assert d.snapshot(d.validate_input({"fail": "fatal"})) == {
        "sleep_ms": 0,
        "fail": "fatal",
        "fail_times": 0,
        "output_bytes": 16,
        "wait_signals": [],
        "signal_timeout_ms": 20_000,
    }


# --- queue concurrency -----------------------------------------------------------------


def test_queue_concurrency_is_the_largest_of_the_queue_types() -> None:
    registry = Registry(
        [
            definition(job_type="bg_small", queue=Queue.BACKGROUND, concurrency=2),
            definition(job_type="bg_big", queue=Queue.BACKGROUND, concurrency=9),
            definition(job_type="bg_mid", queue=Queue.BACKGROUND, concurrency=4),
            definition(job_type="live", queue=Queue.INTERACTIVE, concurrency=3),
        ]
    )
    assert registry.queue_concurrency() == {"ai-background": 9, "ai-interactive": 3}


def test_queue_concurrency_lists_only_queues_with_types() -> None:
    assert Registry().queue_concurrency() == {}
    assert Registry([synthetic.DEFINITION]).queue_concurrency() == {
        "ai-interactive": synthetic.DEFINITION.concurrency
    }
