"""A Python job definition rendered as data: the ``JobTypeSpec`` a worker declares for it.

The job service runs no job type code: all it knows of a type is this spec, so everything a
``JobDefinition`` decides for the control plane must be in it. The input and output models
become JSON Schema (draft 2020-12, what pydantic emits), serialised with sorted keys and
compact separators so that one definition always renders to the same bytes: the job service
compares a declared spec with the stored one, and a difference in key order would be a
conflict that is not there.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, TypeAdapter

from shared.credentials import CredentialMode
from shared.definitions import AbortStrategy, JobDefinition
from shared.pb.jobs.v1 import job_pb2, job_type_pb2

# The dialect pydantic's model_json_schema() follows; named in the schema so that a
# validator in any language reads it as such.
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_ABORT_STRATEGIES = {
    AbortStrategy.FAIL: job_type_pb2.ABORT_STRATEGY_FAIL,
    AbortStrategy.RETRY: job_type_pb2.ABORT_STRATEGY_RETRY,
}
_CREDENTIAL_MODES = {
    CredentialMode.PLATFORM: job_pb2.CREDENTIAL_MODE_PLATFORM,
    CredentialMode.USER: job_pb2.CREDENTIAL_MODE_USER,
}


def spec_of(definition: JobDefinition) -> job_type_pb2.JobTypeSpec:
    """The spec of a definition, the same bytes every time it is rendered."""
    target_type, target_path = definition.default_target or ("", "")
    spec = job_type_pb2.JobTypeSpec(
        job_type=definition.job_type,
        version=definition.version,
        label=definition.label,
        domain=definition.domain,
        queue=str(definition.queue),
        input_schema_json=schema_json(definition.input_model),
        output_schema_json=schema_json(definition.output_model),
        input_schema_version=definition.input_schema_version,
        output_schema_version=definition.output_schema_version,
        default_priority=definition.default_priority,
        timeout_seconds=definition.timeout_s,
        max_attempts=definition.max_attempts,
        backoff_base_seconds=definition.backoff_base_s,
        backoff_max_seconds=definition.backoff_max_s,
        abort_strategy=_ABORT_STRATEGIES[definition.abort_strategy],
        cancellable=definition.cancellable,
        concurrency=definition.concurrency,
        fairness_key=definition.fairness_key,
        concurrency_key=definition.concurrency_key,
        concurrency_limit=definition.concurrency_limit,
        estimated_tokens=definition.estimated_tokens,
        default_target_type=target_type,
        default_target_path=target_path,
        snapshot_fields=snapshot_fields(definition),
        snapshot_ttl_seconds=definition.snapshot_ttl_s,
        # sets in the definition: sorted, so that the rendering does not depend on hashing
        output_redaction=sorted(definition.output_redaction),
        redaction_version=definition.redaction_version,
        content_safety_check=definition.content_safety_check,
        prompt_key=definition.prompt_key,
        prompt_version=definition.prompt_version,
        model_tier=str(definition.model_tier),
        child_job_types=sorted(definition.child_job_types),
        credential_modes=[_CREDENTIAL_MODES[mode] for mode in definition.credential_modes],
    )
    if definition.retention_s is not None:
        spec.retention_seconds = definition.retention_s
    if definition.deadline_s is not None:
        spec.deadline_seconds = definition.deadline_s
    return spec


def schema_json(model: type[BaseModel]) -> str:
    """A model's JSON Schema as canonical text: sorted keys, no insignificant whitespace."""
    schema: dict[str, Any] = {"$schema": JSON_SCHEMA_DIALECT, **model.model_json_schema()}
    properties = schema.get("properties", {})
    for name, info in model.model_fields.items():
        # a default made by a factory is no default to JSON Schema: written out, so that the
        # job service fills it in as the model would (a request hashes as it always did)
        if info.default_factory is not None and name in properties:
            made = info.default_factory()  # type: ignore[call-arg]
            properties[name]["default"] = TypeAdapter(Any).dump_python(made, mode="json")
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def snapshot_fields(definition: JobDefinition) -> list[str]:
    """The declared input fields a snapshot may hold, in declaration order: the allow-list
    resolved, so that the job service needs neither the model nor the secret markings."""
    withheld = set(definition.withheld_fields())
    return [name for name in definition.input_model.model_fields if name not in withheld]
