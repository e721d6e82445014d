"""A job type as the job service knows it: a spec some worker declared (``JobTypeSpec``),
never the type's code. What it decides about one job's input — whether it is valid, its
scheduling keys, its default target, the snapshot the executor sees — it reads from the
spec's JSON Schemas and paths; what a worker submits is checked against its output schema.

``JobType`` keeps the attribute names a Python ``JobDefinition`` has, so that the rest of
the job service reads one vocabulary whichever language the type is written in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from job_service.domain.input_schemas import CompiledSchema
from shared.credentials import CredentialMode
from shared.definitions import SECRET_NAME, AbortStrategy
from shared.errors import FieldViolation, InvalidInput
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_type_pb2 as tpb

_MODES = {
    job_pb2.CREDENTIAL_MODE_PLATFORM: CredentialMode.PLATFORM,
    job_pb2.CREDENTIAL_MODE_USER: CredentialMode.USER,
}


@dataclass(frozen=True)
class JobType:
    job_type: str
    version: str
    label: str
    domain: str
    queue: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    input_schema_version: str
    output_schema_version: str
    default_priority: int
    timeout_s: float
    max_attempts: int
    backoff_base_s: float
    backoff_max_s: float
    abort_strategy: AbortStrategy
    cancellable: bool
    concurrency: int
    fairness_key: str
    concurrency_key: str
    concurrency_limit: int
    estimated_tokens: int
    default_target: tuple[str, str] | None
    snapshot_fields: tuple[str, ...]
    snapshot_ttl_s: float
    output_redaction: frozenset[str]
    redaction_version: str
    content_safety_check: bool
    retention_s: float | None
    deadline_s: float | None
    prompt_key: str
    prompt_version: str
    model_tier: str
    child_job_types: frozenset[str]
    credential_modes: tuple[CredentialMode, ...]
    spec: tpb.JobTypeSpec = field(compare=False, repr=False)
    _input: CompiledSchema = field(compare=False, repr=False)
    _output: CompiledSchema = field(compare=False, repr=False)

    @classmethod
    def from_spec(cls, spec: tpb.JobTypeSpec) -> JobType:
        """The type a spec describes; the spec has passed ``spec_checks.problems``."""
        input_schema = json.loads(spec.input_schema_json)
        output_schema = json.loads(spec.output_schema_json)
        target = (
            (spec.default_target_type, spec.default_target_path)
            if spec.default_target_type
            else None
        )
        return cls(
            job_type=spec.job_type,
            version=spec.version,
            label=spec.label,
            domain=spec.domain,
            queue=spec.queue,
            input_schema=input_schema,
            output_schema=output_schema,
            input_schema_version=spec.input_schema_version or "1",
            output_schema_version=spec.output_schema_version or "1",
            default_priority=spec.default_priority,
            timeout_s=spec.timeout_seconds,
            max_attempts=spec.max_attempts,
            backoff_base_s=spec.backoff_base_seconds,
            backoff_max_s=spec.backoff_max_seconds,
            abort_strategy=(
                AbortStrategy.RETRY
                if spec.abort_strategy == tpb.ABORT_STRATEGY_RETRY
                else AbortStrategy.FAIL
            ),
            cancellable=spec.cancellable,
            concurrency=spec.concurrency,
            fairness_key=spec.fairness_key,
            concurrency_key=spec.concurrency_key,
            concurrency_limit=spec.concurrency_limit,
            estimated_tokens=spec.estimated_tokens,
            default_target=target,
            # a name that looks like a secret never enters a snapshot, whatever a spec says
            snapshot_fields=tuple(f for f in spec.snapshot_fields if not SECRET_NAME.search(f)),
            snapshot_ttl_s=spec.snapshot_ttl_seconds,
            output_redaction=frozenset(spec.output_redaction),
            redaction_version=spec.redaction_version,
            content_safety_check=spec.content_safety_check,
            retention_s=spec.retention_seconds if spec.HasField("retention_seconds") else None,
            deadline_s=spec.deadline_seconds if spec.HasField("deadline_seconds") else None,
            prompt_key=spec.prompt_key,
            prompt_version=spec.prompt_version,
            model_tier=spec.model_tier,
            child_job_types=frozenset(spec.child_job_types),
            credential_modes=tuple(_MODES[m] for m in spec.credential_modes if m in _MODES),
            spec=spec,
            _input=CompiledSchema(input_schema),
            _output=CompiledSchema(output_schema),
        )

    @property
    def definition_id(self) -> str:
        return f"{self.job_type}@{self.version}"

    def validate_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The input as the job keeps it: checked against the input schema (InvalidInput
        naming every bad field), undeclared fields dropped where the schema lists its
        properties, the declared defaults of missing top-level fields filled in."""
        problems = self._input.problems(raw, "input")
        if problems:
            raise InvalidInput(f"input does not match the {self.job_type} schema", problems)
        return declared(self.input_schema, raw)

    def check_output(self, output: dict[str, Any]) -> list[FieldViolation]:
        """What is wrong with a submitted output, by the declared output schema."""
        return self._output.problems(output, "output")

    def output_refusal(self, output: dict[str, Any]) -> str:
        """Why a submitted output is refused ("": it is not). Names the fields, never their
        values: it is stored as the job's error."""
        problems = self.check_output(output)
        if not problems:
            return ""
        fields = ", ".join(dict.fromkeys(p.field for p in problems))
        return f"the output does not match the declared output schema of {self.job_type}: {fields}"

    def target_of(self, validated: dict[str, Any]) -> tuple[str, str] | None:
        """The default target of a job with this input, or None."""
        if self.default_target is None:
            return None
        target_type, path = self.default_target
        value = value_at(validated, path)
        return (target_type, str(value)) if value not in (None, "") else None

    def scheduling_keys(self, validated: dict[str, Any], user_id: str) -> tuple[str, str | None]:
        """The job's fairness key and concurrency key (None without a limit). A user-scoped
        key of a child job, whose user the job service fills in, reads "{user}"."""
        fairness = _key_value(self.fairness_key, validated, user_id)
        if not self.concurrency_key:
            return fairness, None
        return fairness, f"{self.job_type}:{self.concurrency_key}=" + _key_value(
            self.concurrency_key, validated, user_id
        )

    def snapshot(self, validated: dict[str, Any]) -> dict[str, Any]:
        """What the executor may see: the allow-listed fields only."""
        return {name: validated[name] for name in self.snapshot_fields if name in validated}

    def withheld_fields(self) -> tuple[str, ...]:
        """The declared input fields a snapshot never holds, in declaration order."""
        allowed = set(self.snapshot_fields)
        return tuple(p for p in self.input_schema.get("properties", {}) if p not in allowed)


def declared(schema: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as a pydantic model of ``schema`` would dump it at the top level: only the
    declared properties (unless the schema lets others in), defaults filled in — so that a
    request hashes the same whether or not it spells out a default."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return dict(raw)
    extra = schema.get("additionalProperties", False)
    kept = {k: v for k, v in raw.items() if k in properties or extra not in (False, None)}
    for name, prop in properties.items():
        if name not in kept and isinstance(prop, dict) and "default" in prop:
            kept[name] = prop["default"]
    return kept


def value_at(document: dict[str, Any], path: str) -> Any:
    """The value at ``input.<a>.<b>`` in the input (None where a step is missing)."""
    value: Any = document
    for step in path.removeprefix("input.").split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _key_value(spec: str, validated: dict[str, Any], user_id: str) -> str:
    if spec == "user":
        return user_id or "{user}"
    return str(value_at(validated, spec))
