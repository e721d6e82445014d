"""What is wrong with a declared ``JobTypeSpec``, and how two specs of one type differ.

A worker declares the specs of the types it runs; the job service stores a spec it can
run jobs by, or refuses it naming each bad proto field ("spec.queue"). The rules are
those a Python ``JobDefinition`` passes to be registered (``shared.registry``), read off
the spec: the limits are the same, and the paths that keys and targets read must name
properties of the declared input schema (dotted for nested objects, through the schema's
own ``$ref``\\ s), as the job service resolves them.

A spec declared again for a stored (type, version) must be the same spec:
``differences`` names the fields that are not, comparing schemas as JSON documents (key
order and spacing are not a difference) and repeated fields as lists.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from job_service.domain.checks import JOB_TYPE_PATTERN, MAX_PRIORITY, MIN_PRIORITY
from job_service.domain.input_schemas import CompiledSchema, SchemaError
from shared.ai.provider import ModelTier
from shared.constants import Queue
from shared.durable_steps import MAX_DEADLINE_S
from shared.errors import FieldViolation
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_type_pb2 as tpb

# The limits shared.registry holds a Python definition to.
MAX_VERSION_CHARS = 100
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1.0, 600.0
MAX_ATTEMPTS = 100
MAX_REDACTION_VERSION_CHARS = 32
MAX_TARGET_TYPE_CHARS = 32
# A schema is stored with its spec, loaded and compiled by every replica: the shipped ones
# are under 2 KiB, one of thousands of fields well under this.
MAX_SCHEMA_BYTES = 256 * 1024
# A fairness or concurrency key: the job's owner, or a path into the input.
INPUT_PATH = re.compile(r"input(\.[A-Za-z_][A-Za-z0-9_]{0,63})+")
_KNOWN_MODES = frozenset({job_pb2.CREDENTIAL_MODE_PLATFORM, job_pb2.CREDENTIAL_MODE_USER})
_KNOWN_ABORTS = frozenset(tpb.AbortStrategy.values())
_SCHEMA_FIELDS = frozenset({"input_schema_json", "output_schema_json"})
# optional scalars: unset and 0 differ
_OPTIONAL_FIELDS = frozenset({"retention_seconds", "deadline_seconds"})


def problems(spec: tpb.JobTypeSpec) -> list[FieldViolation]:
    """Every bad field of ``spec``, named "spec.<field>"; [] for a spec jobs can run by."""
    found: list[tuple[str, str]] = []
    input_schema = _schema(spec.input_schema_json, "input_schema_json", found)
    output_schema = _schema(spec.output_schema_json, "output_schema_json", found)
    found += _identity(spec) + _attempts(spec) + _models(spec)
    found += _scheduling(spec, input_schema) + _lifecycle(spec, input_schema, output_schema)
    return [FieldViolation(f"spec.{name}", description) for name, description in found]


def differences(stored: tpb.JobTypeSpec, declared: tpb.JobTypeSpec) -> list[str]:
    """The names of the fields whose values differ, in the proto's field order."""
    return [
        f.name
        for f in tpb.JobTypeSpec.DESCRIPTOR.fields
        if _comparable(stored, f.name) != _comparable(declared, f.name)
    ]


def _comparable(spec: tpb.JobTypeSpec, name: str) -> Any:
    value = getattr(spec, name)
    if name in _SCHEMA_FIELDS:
        try:
            return json.loads(value)
        except ValueError:
            return value
    if name in _OPTIONAL_FIELDS:
        return value if spec.HasField(name) else None
    return list(value) if hasattr(value, "extend") else value


def _schema(text: str, name: str, found: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The schema as a document, or None (with the problem noted) when it is not one."""
    if len(text.encode()) > MAX_SCHEMA_BYTES:
        found.append((name, f"is over {MAX_SCHEMA_BYTES // 1024} KiB"))
        return None
    try:
        schema = json.loads(text)
    except ValueError:
        found.append((name, "is not JSON"))
        return None
    except RecursionError:  # nested deeper than the parser goes: no schema is
        found.append((name, "nests too deep"))
        return None
    if not isinstance(schema, dict):
        found.append((name, "must be a JSON object"))
        return None
    try:
        CompiledSchema(schema)
    except SchemaError as exc:
        found.append((name, str(exc)))
        return None
    return schema


def _identity(spec: tpb.JobTypeSpec) -> list[tuple[str, str]]:
    found = []
    if not JOB_TYPE_PATTERN.fullmatch(spec.job_type):
        found.append(("job_type", f"must match ^{JOB_TYPE_PATTERN.pattern}$"))
    if not 1 <= len(spec.version) <= MAX_VERSION_CHARS or not spec.version.isprintable():
        found.append(("version", f"must be 1..{MAX_VERSION_CHARS} printable characters"))
    if spec.queue not in set(Queue):
        found.append(("queue", f"must be one of {', '.join(Queue)}"))
    if not MIN_PRIORITY <= spec.default_priority <= MAX_PRIORITY:
        found.append(("default_priority", f"must be within {MIN_PRIORITY}..{MAX_PRIORITY}"))
    return found


def _attempts(spec: tpb.JobTypeSpec) -> list[tuple[str, str]]:
    found = []
    if not MIN_TIMEOUT_S <= spec.timeout_seconds <= MAX_TIMEOUT_S:
        found.append(("timeout_seconds", f"must be within {MIN_TIMEOUT_S}..{MAX_TIMEOUT_S}"))
    if not 1 <= spec.max_attempts <= MAX_ATTEMPTS:
        found.append(("max_attempts", f"must be within 1..{MAX_ATTEMPTS}"))
    if not (spec.backoff_base_seconds > 0 and math.isfinite(spec.backoff_base_seconds)):
        found.append(("backoff_base_seconds", "must be positive"))
    elif not spec.backoff_max_seconds >= spec.backoff_base_seconds:
        found.append(("backoff_max_seconds", "must be at least backoff_base_seconds"))
    if spec.abort_strategy not in _KNOWN_ABORTS:
        found.append(("abort_strategy", "is not a known AbortStrategy"))
    return found


def _models(spec: tpb.JobTypeSpec) -> list[tuple[str, str]]:
    found = []
    if spec.prompt_key and not spec.prompt_version:
        found.append(("prompt_version", "is required with prompt_key"))
    if spec.prompt_version and not spec.prompt_key:
        found.append(("prompt_key", "is required with prompt_version"))
    if spec.model_tier and spec.model_tier not in set(ModelTier):
        found.append(("model_tier", f"must be empty or one of {', '.join(ModelTier)}"))
    if not all(JOB_TYPE_PATTERN.fullmatch(child) for child in spec.child_job_types):
        found.append(("child_job_types", "must name job types"))
    if not spec.credential_modes or not set(spec.credential_modes) <= _KNOWN_MODES:
        found.append(
            ("credential_modes", "must name CREDENTIAL_MODE_PLATFORM or CREDENTIAL_MODE_USER")
        )
    return found


def _scheduling(spec: tpb.JobTypeSpec, schema: dict[str, Any] | None) -> list[tuple[str, str]]:
    found = []
    for name, key in (
        ("fairness_key", spec.fairness_key),
        ("concurrency_key", spec.concurrency_key),
    ):
        if key == "user" or (not key and name == "concurrency_key"):
            continue
        if not INPUT_PATH.fullmatch(key):
            found.append((name, "must be 'user' or 'input.<field>'"))
        elif schema is not None and not _names_property(schema, key):
            found.append((name, f"{key} is not a property of the input schema"))
    if spec.concurrency_key and spec.concurrency_limit <= 0:
        found.append(("concurrency_limit", "must be positive with a concurrency_key"))
    elif spec.concurrency_limit < 0:
        found.append(("concurrency_limit", "must not be negative"))
    elif spec.concurrency_limit and not spec.concurrency_key:
        found.append(("concurrency_key", "is required with a concurrency_limit"))
    if spec.concurrency < 1:
        found.append(("concurrency", "must be at least 1"))
    if spec.estimated_tokens < 0:
        found.append(("estimated_tokens", "must not be negative"))
    return found


def _lifecycle(
    spec: tpb.JobTypeSpec,
    input_schema: dict[str, Any] | None,
    output_schema: dict[str, Any] | None,
) -> list[tuple[str, str]]:
    found = []
    if input_schema is not None:
        unknown = [
            f for f in spec.snapshot_fields if not _names_property(input_schema, f"input.{f}")
        ]
        if unknown:
            found.append(("snapshot_fields", f"not properties of the input schema: {unknown}"))
    if not spec.snapshot_ttl_seconds > 0:
        found.append(("snapshot_ttl_seconds", "must be positive"))
    if output_schema is not None:
        unknown = [f for f in spec.output_redaction if f not in _properties(output_schema)]
        if unknown:
            found.append(("output_redaction", f"not properties of the output schema: {unknown}"))
    if not 1 <= len(spec.redaction_version) <= MAX_REDACTION_VERSION_CHARS:
        found.append(("redaction_version", f"must be 1..{MAX_REDACTION_VERSION_CHARS} characters"))
    if spec.HasField("retention_seconds") and not spec.retention_seconds >= 0:
        found.append(("retention_seconds", "must not be negative"))
    if spec.HasField("deadline_seconds") and not 0 < spec.deadline_seconds <= MAX_DEADLINE_S:
        found.append(("deadline_seconds", f"must be within 0..{MAX_DEADLINE_S:.0f} (366 days)"))
    return found + _target(spec, input_schema)


def _target(spec: tpb.JobTypeSpec, schema: dict[str, Any] | None) -> list[tuple[str, str]]:
    kind, path = spec.default_target_type, spec.default_target_path
    if not kind and not path:
        return []
    found = []
    if not JOB_TYPE_PATTERN.fullmatch(kind) or len(kind) > MAX_TARGET_TYPE_CHARS:
        found.append(
            (
                "default_target_type",
                f"must be a short name (a-z, 0-9, _), at most {MAX_TARGET_TYPE_CHARS} characters",
            )
        )
    if not INPUT_PATH.fullmatch(path):
        found.append(("default_target_path", "must be 'input.<field>' (with a type)"))
    elif schema is not None and not _names_property(schema, path):
        found.append(("default_target_path", f"{path} is not a property of the input schema"))
    return found


def _names_property(schema: dict[str, Any], path: str) -> bool:
    """Whether ``input.<a>.<b>`` names a declared property, object by object, following the
    schema's local references ("#/$defs/Item")."""
    node: Any = schema
    for step in path.split(".")[1:]:
        properties = _properties(_resolved(schema, node))
        if step not in properties:
            return False
        node = properties[step]
    return True


def _properties(node: Any) -> dict[str, Any]:
    properties = node.get("properties") if isinstance(node, dict) else None
    return properties if isinstance(properties, dict) else {}


def _resolved(root: dict[str, Any], node: Any) -> Any:
    """``node`` with its local ``$ref`` followed (a few hops, never a cycle's worth)."""
    for _ in range(8):
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        node = target
    return node
