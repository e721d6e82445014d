"""A declared JobTypeSpec (issue 41): each rule a malformed spec breaks names its proto
field; the six shipped types' specs pass; two specs' differences are named exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from job_service.domain.spec_checks import differences, problems
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_type_pb2 as tpb
from shared.registry import default_registry

SHIPPED = [d.job_type for d in default_registry({})]
# an input with a nested object, for dotted paths through a $ref
INPUT_SCHEMA = {
    "$defs": {"Owner": {"properties": {"team": {"type": "string"}}, "type": "object"}},
    "properties": {
        "tenant": {"type": "string"},
        "owner": {"$ref": "#/$defs/Owner"},
        "text": {"type": "string"},
    },
    "required": ["tenant"],
    "type": "object",
}
OUTPUT_SCHEMA = {"properties": {"text": {"type": "string"}, "raw": {"type": "string"}}}


def good(**changes: Any) -> tpb.JobTypeSpec:
    spec = tpb.JobTypeSpec(
        job_type="text_stats",
        version="1.0.0",
        queue="ai-background",
        input_schema_json=json.dumps(INPUT_SCHEMA),
        output_schema_json=json.dumps(OUTPUT_SCHEMA),
        timeout_seconds=30.0,
        max_attempts=3,
        backoff_base_seconds=0.5,
        backoff_max_seconds=60.0,
        concurrency=4,
        fairness_key="user",
        snapshot_fields=["tenant", "text"],
        snapshot_ttl_seconds=3600.0,
        redaction_version="1",
        credential_modes=[job_pb2.CREDENTIAL_MODE_PLATFORM],
    )
    for name, value in changes.items():
        if isinstance(value, list):
            del getattr(spec, name)[:]
            getattr(spec, name).extend(value)
        else:
            setattr(spec, name, value)
    return spec


def fields(spec: tpb.JobTypeSpec) -> list[str]:
    return [p.field for p in problems(spec)]


@pytest.mark.parametrize("job_type", SHIPPED)
def test_the_shipped_types_specs_pass(job_type: str) -> None:
    assert problems(spec_of(default_registry({}).get(job_type))) == []


def test_a_good_spec_passes_with_nested_paths_and_every_option_set() -> None:
    spec = good(
        fairness_key="input.owner.team",
        concurrency_key="input.tenant",
        concurrency_limit=2,
        default_target_type="tenant",
        default_target_path="input.tenant",
        output_redaction=["raw"],
        prompt_key="stats",
        prompt_version="1",
        model_tier="cheap",
        child_job_types=["synthetic"],
        credential_modes=[job_pb2.CREDENTIAL_MODE_PLATFORM, job_pb2.CREDENTIAL_MODE_USER],
        abort_strategy=tpb.ABORT_STRATEGY_RETRY,
        retention_seconds=0.0,
        default_priority=-5,
    )
    assert problems(spec) == []


BAD: list[tuple[dict[str, Any], str]] = [
    ({"job_type": "Text-Stats"}, "spec.job_type"),
    ({"job_type": "x"}, "spec.job_type"),
    ({"version": ""}, "spec.version"),
    ({"version": "v" * 101}, "spec.version"),
    ({"version": "1.0\n"}, "spec.version"),
    ({"queue": "ai-somewhere"}, "spec.queue"),
    ({"default_priority": 1001}, "spec.default_priority"),
    ({"timeout_seconds": 0.5}, "spec.timeout_seconds"),
    ({"timeout_seconds": 601.0}, "spec.timeout_seconds"),
    ({"timeout_seconds": float("nan")}, "spec.timeout_seconds"),
    ({"max_attempts": 0}, "spec.max_attempts"),
    ({"max_attempts": 101}, "spec.max_attempts"),
    ({"backoff_base_seconds": 0.0}, "spec.backoff_base_seconds"),
    ({"backoff_base_seconds": 2.0, "backoff_max_seconds": 1.0}, "spec.backoff_max_seconds"),
    ({"abort_strategy": 7}, "spec.abort_strategy"),
    ({"concurrency": 0}, "spec.concurrency"),
    ({"fairness_key": ""}, "spec.fairness_key"),
    ({"fairness_key": "tenant"}, "spec.fairness_key"),
    ({"fairness_key": "input.nope"}, "spec.fairness_key"),
    ({"fairness_key": "input.owner.nope"}, "spec.fairness_key"),
    ({"fairness_key": "input.tenant.deeper"}, "spec.fairness_key"),
    ({"concurrency_key": "input.nope", "concurrency_limit": 1}, "spec.concurrency_key"),
    ({"concurrency_key": "user"}, "spec.concurrency_limit"),
    ({"concurrency_limit": 3}, "spec.concurrency_key"),
    ({"concurrency_limit": -1}, "spec.concurrency_limit"),
    ({"estimated_tokens": -1}, "spec.estimated_tokens"),
    ({"model_tier": "premium"}, "spec.model_tier"),
    ({"prompt_key": "stats"}, "spec.prompt_version"),
    ({"prompt_version": "1"}, "spec.prompt_key"),
    ({"child_job_types": ["Not A Type"]}, "spec.child_job_types"),
    ({"credential_modes": []}, "spec.credential_modes"),
    ({"credential_modes": [job_pb2.CREDENTIAL_MODE_UNSPECIFIED]}, "spec.credential_modes"),
    ({"credential_modes": [9]}, "spec.credential_modes"),
    ({"snapshot_fields": ["tenant", "ghost"]}, "spec.snapshot_fields"),
    ({"snapshot_ttl_seconds": 0.0}, "spec.snapshot_ttl_seconds"),
    ({"output_redaction": ["secret_notes"]}, "spec.output_redaction"),
    ({"redaction_version": ""}, "spec.redaction_version"),
    ({"redaction_version": "r" * 33}, "spec.redaction_version"),
    ({"retention_seconds": -1.0}, "spec.retention_seconds"),
    ({"default_target_type": "tenant"}, "spec.default_target_path"),
    ({"default_target_path": "input.tenant"}, "spec.default_target_type"),
    (
        {"default_target_type": "t" * 33, "default_target_path": "input.tenant"},
        "spec.default_target_type",
    ),
    (
        {"default_target_type": "tenant", "default_target_path": "input.ghost"},
        "spec.default_target_path",
    ),
    ({"input_schema_json": "{not json"}, "spec.input_schema_json"),
    ({"input_schema_json": "[1, 2]"}, "spec.input_schema_json"),
    ({"input_schema_json": '{"type": "strin"}'}, "spec.input_schema_json"),
    ({"input_schema_json": '{"$ref": "#/$defs/Missing"}'}, "spec.input_schema_json"),
    ({"output_schema_json": ""}, "spec.output_schema_json"),
    ({"output_schema_json": '{"properties": {"a": {"minLength": -1}}}'}, "spec.output_schema_json"),
]


@pytest.mark.parametrize(("changes", "field"), BAD)
def test_each_rule_names_the_field(changes: dict[str, Any], field: str) -> None:
    found = problems(good(**changes))
    assert [p.field for p in found] == [field]
    assert all(p.description and len(p.description) < 120 for p in found)


def test_every_broken_rule_is_named_at_once() -> None:
    spec = good(queue="nowhere", max_attempts=0, concurrency=0, redaction_version="")
    assert sorted(fields(spec)) == [
        "spec.concurrency",
        "spec.max_attempts",
        "spec.queue",
        "spec.redaction_version",
    ]


def test_a_broken_input_schema_does_not_hide_the_other_problems() -> None:
    # the paths cannot be checked against it, but nothing else is skipped
    spec = good(input_schema_json="{", fairness_key="input.anything", queue="nowhere")
    assert sorted(fields(spec)) == ["spec.input_schema_json", "spec.queue"]


def test_the_same_spec_has_no_differences() -> None:
    spec = spec_of(default_registry({}).get("feynman_evaluation"))
    again = spec_of(default_registry({}).get("feynman_evaluation"))
    assert differences(spec, again) == []


def test_schemas_differ_as_documents_not_as_text() -> None:
    respaced = json.dumps(INPUT_SCHEMA, indent=2, sort_keys=False)
    assert differences(good(), good(input_schema_json=respaced)) == []
    changed = dict(INPUT_SCHEMA, required=["tenant", "text"])
    assert differences(good(), good(input_schema_json=json.dumps(changed))) == ["input_schema_json"]


def test_differences_name_exactly_the_changed_fields_in_proto_order() -> None:
    stored = good()
    declared = good(
        timeout_seconds=45.0,
        output_schema_json=json.dumps({"properties": {}}),
        snapshot_fields=["text", "tenant"],  # the order of a repeated field counts
        credential_modes=[job_pb2.CREDENTIAL_MODE_PLATFORM, job_pb2.CREDENTIAL_MODE_USER],
    )
    assert differences(stored, declared) == [
        "output_schema_json",
        "timeout_seconds",
        "snapshot_fields",
        "credential_modes",
    ]


def test_an_unset_retention_differs_from_a_retention_of_zero() -> None:
    assert differences(good(), good(retention_seconds=0.0)) == ["retention_seconds"]
    assert differences(good(retention_seconds=0.0), good(retention_seconds=0.0)) == []


@pytest.mark.parametrize("job_type", SHIPPED)
def test_each_shipped_spec_differs_from_a_changed_copy_in_that_field_only(job_type: str) -> None:
    stored = spec_of(default_registry({}).get(job_type))
    declared = tpb.JobTypeSpec()
    declared.CopyFrom(stored)
    declared.max_attempts += 1
    declared.label += " (renamed)"
    assert differences(stored, declared) == ["label", "max_attempts"]
