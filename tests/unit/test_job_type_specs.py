"""A Python definition rendered as a JobTypeSpec (issue 41): every field of the spec says
what the definition says, for the six shipped types, and the rendering is deterministic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.job_type_specs import JSON_SCHEMA_DIALECT, spec_of
from shared.pb.jobs.v1 import job_pb2, job_type_pb2
from shared.registry import AbortStrategy, JobDefinition, JobResult, default_registry

SHIPPED = (
    "feynman_evaluation",
    "review_card_generation",
    "knowledge_base_review",
    "study_plan",
    "synthetic",
    "approval_agent",
)


def shipped(job_type: str) -> JobDefinition:
    return default_registry({}).get(job_type)


def test_the_six_shipped_types_are_rendered() -> None:
    assert sorted(d.job_type for d in default_registry({})) == sorted(SHIPPED)


@pytest.mark.parametrize("job_type", SHIPPED)
def test_every_scalar_field_says_what_the_definition_says(job_type: str) -> None:
    d = shipped(job_type)
    spec = spec_of(d)
    assert (spec.job_type, spec.version, spec.label, spec.domain) == (
        d.job_type,
        d.version,
        d.label,
        d.domain,
    )
    assert spec.queue == d.queue and spec.queue in set(Queue)
    assert spec.input_schema_version == d.input_schema_version
    assert spec.output_schema_version == d.output_schema_version
    assert spec.default_priority == d.default_priority
    assert spec.timeout_seconds == d.timeout_s
    assert spec.max_attempts == d.max_attempts
    assert spec.backoff_base_seconds == d.backoff_base_s
    assert spec.backoff_max_seconds == d.backoff_max_s
    assert spec.cancellable is d.cancellable
    assert spec.concurrency == d.concurrency
    assert spec.fairness_key == d.fairness_key
    assert spec.concurrency_key == d.concurrency_key
    assert spec.concurrency_limit == d.concurrency_limit
    assert spec.estimated_tokens == d.estimated_tokens
    assert spec.snapshot_ttl_seconds == d.snapshot_ttl_s
    assert spec.redaction_version == d.redaction_version
    assert spec.content_safety_check is d.content_safety_check
    assert (spec.prompt_key, spec.prompt_version) == (d.prompt_key, d.prompt_version)
    assert spec.model_tier == str(d.model_tier)


@pytest.mark.parametrize("job_type", SHIPPED)
def test_enums_and_lists_say_what_the_definition_says(job_type: str) -> None:
    d = shipped(job_type)
    spec = spec_of(d)
    abort = job_type_pb2.AbortStrategy.Name(spec.abort_strategy)
    assert abort == f"ABORT_STRATEGY_{d.abort_strategy.name}"
    modes = [job_pb2.CredentialMode.Name(m) for m in spec.credential_modes]
    assert modes == [f"CREDENTIAL_MODE_{m.name}" for m in d.credential_modes]
    assert list(spec.child_job_types) == sorted(d.child_job_types)
    assert list(spec.output_redaction) == sorted(d.output_redaction)
    if d.default_target is None:
        assert (spec.default_target_type, spec.default_target_path) == ("", "")
    else:
        assert (spec.default_target_type, spec.default_target_path) == d.default_target
    assert spec.HasField("retention_seconds") is (d.retention_s is not None)


@pytest.mark.parametrize("job_type", SHIPPED)
def test_schemas_are_the_models_json_schema_in_draft_2020_12(job_type: str) -> None:
    d = shipped(job_type)
    spec = spec_of(d)
    for text, model in (
        (spec.input_schema_json, d.input_model),
        (spec.output_schema_json, d.output_model),
    ):
        expected = {"$schema": JSON_SCHEMA_DIALECT, **model.model_json_schema()}
        for name, info in model.model_fields.items():  # factories' defaults written out
            if info.default_factory is not None:
                expected["properties"][name]["default"] = info.default_factory()  # type: ignore[call-arg]
        assert json.loads(text) == expected
        # canonical text: sorted keys, compact separators
        canonical = json.dumps(
            json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        assert text == canonical


@pytest.mark.parametrize("job_type", SHIPPED)
def test_snapshot_fields_are_the_declared_fields_a_snapshot_keeps(job_type: str) -> None:
    d = shipped(job_type)
    declared = list(d.input_model.model_fields)
    withheld = set(d.withheld_fields())
    assert list(spec_of(d).snapshot_fields) == [f for f in declared if f not in withheld]


@pytest.mark.parametrize("job_type", SHIPPED)
def test_rendering_is_deterministic(job_type: str) -> None:
    first = spec_of(shipped(job_type)).SerializeToString(deterministic=True)
    again = spec_of(shipped(job_type)).SerializeToString(deterministic=True)
    assert first == again


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(min_length=1)
    note: str = ""
    api_key: str = ""
    hidden: str = Field(default="", json_schema_extra={"secret": True})
    topic: str = ""


class _Output(BaseModel):
    text: str
    raw: str = ""


async def _execute(job_input: Any, ctx: Any) -> JobResult:  # never called here
    return JobResult(output=_Output(text=""))


def _custom() -> JobDefinition:
    return JobDefinition(
        job_type="custom",
        label="Custom",
        domain="testing",
        version="2",
        queue=Queue.BACKGROUND,
        input_model=_Input,
        output_model=_Output,
        execute=_execute,
        snapshot_fields=frozenset({"tenant", "api_key", "hidden", "topic"}),
        retention_s=0.0,
        abort_strategy=AbortStrategy.FAIL,
        credential_modes=(CredentialMode.USER,),
        child_job_types=frozenset({"b_type", "a_type"}),
        output_redaction=frozenset({"raw", "text"}),
        concurrency_key="input.tenant",
        concurrency_limit=2,
    )


def test_snapshot_fields_leave_out_unlisted_secret_named_and_secret_marked_fields() -> None:
    # note is not listed, api_key is named like a secret, hidden is marked secret
    assert list(spec_of(_custom()).snapshot_fields) == ["tenant", "topic"]


def test_a_retention_of_zero_is_set_and_none_is_unset() -> None:
    spec = spec_of(_custom())
    assert spec.HasField("retention_seconds") and spec.retention_seconds == 0.0
    assert spec.abort_strategy == job_type_pb2.ABORT_STRATEGY_FAIL
    assert list(spec.credential_modes) == [job_pb2.CREDENTIAL_MODE_USER]
    assert list(spec.child_job_types) == ["a_type", "b_type"]
    assert list(spec.output_redaction) == ["raw", "text"]
    assert (spec.concurrency_key, spec.concurrency_limit) == ("input.tenant", 2)
