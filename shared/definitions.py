"""A job definition: what a job type is (its queue, models, limits, scheduling keys and data
lifecycle), as its Python code defines it. The worker renders it to the spec it declares
(``shared/job_type_specs.py``); the job service decides a job's target, keys and snapshot
from that spec (``job_service/domain/job_types.py``), never from this object.
Job type authors import ``JobDefinition`` from ``shared.registry``, which checks a
definition when it is registered."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from shared.ai.provider import ModelTier
from shared.credentials import CredentialMode
from shared.errors import FieldViolation, InvalidInput
from shared.execution import Execute
from shared.validation import validation_problems

# Input field names that never enter a snapshot, whatever an allow-list says.
SECRET_NAME = re.compile(
    r"(^|_)(api_?key|apikey|token|secret|password|passwd|jwt|authorization|credential|"
    r"private_?key|access_?key)s?($|_)",
    re.IGNORECASE,
)
DEFAULT_SNAPSHOT_TTL_S = 30 * 24 * 3600.0


class AbortStrategy(StrEnum):
    """What a timed-out attempt leads to."""

    FAIL = "fail"
    RETRY = "retry"


@dataclass(frozen=True)
class JobDefinition:
    job_type: str
    label: str
    domain: str
    version: str
    queue: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    execute: Execute
    input_schema_version: str = "1"
    output_schema_version: str = "1"
    default_priority: int = 0
    timeout_s: float = 60.0
    # Attempts in all, the first included.
    max_attempts: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 60.0
    cancellable: bool = True
    abort_strategy: AbortStrategy = AbortStrategy.FAIL
    # Jobs of this type one worker runs at once; a queue's slots are its types' maximum.
    concurrency: int = 8
    # The input fields a snapshot may hold (None: every declared field); fields named like
    # secrets (SECRET_NAME) or marked secret never enter it either way.
    snapshot_fields: frozenset[str] | None = None
    # A finished job's snapshot is removed this long after creation.
    snapshot_ttl_s: float = DEFAULT_SNAPSHOT_TTL_S
    # The prompt and model tier jobs of this type are created with (AI job types).
    prompt_key: str = ""
    prompt_version: str = ""
    model_tier: ModelTier | Literal[""] = ""
    # Job types this type's projection may create as children.
    child_job_types: frozenset[str] = frozenset()
    # Whose provider keys a job of this type may run with (CreateJob's credential_mode).
    credential_modes: tuple[CredentialMode, ...] = (CredentialMode.PLATFORM,)
    # Scheduling. Fair share is kept across this key within a queue and priority: "user"
    # (the job's owner) or "input.<field>" (a declared input field, e.g. a tenant).
    fairness_key: str = "user"
    # At most `concurrency_limit` jobs of this type with the same key run at once,
    # fleet-wide: "" (no limit), "user" or "input.<field>" (e.g. "input.knowledge_base_id").
    concurrency_key: str = ""
    concurrency_limit: int = 0
    # Provider tokens one attempt is expected to use: reserved from the model tier's rate
    # limit when a job is granted, settled with the real usage when it ends.
    estimated_tokens: int = 1000
    # Data lifecycle (seed 000 §2.1 security, seed 003 §6).
    # Output fields never stored in the job row nor returned to the owner: the job keeps
    # "sha256:<hex>" of the field's canonical JSON in their place (seed 000 outputRedaction).
    output_redaction: frozenset[str] = frozenset()
    # The version of this definition's redaction rules (snapshot allow-list, secret names,
    # output_redaction); recorded with every snapshot (seed 000 §8.4 redactionVersion).
    redaction_version: str = "1"
    # Whether prompts and outputs pass a content-safety check (seed 000 contentSafetyCheck).
    content_safety_check: bool = False
    # A finished job (with its events, artifacts, snapshot, usage and outbox rows) is
    # deleted this long after it finished; None: the deployment's JOBS_JOB_RETENTION_S.
    # 0 keeps them forever.
    retention_s: float | None = None
    # A job not finished this long after its creation (or its run_at) ends FAILED with
    # DEADLINE_EXCEEDED, whatever its retries, sleeps and waits (CreateJob's deadline
    # overrides it); None: no deadline. At most 366 days.
    deadline_s: float | None = None
    # What a job is about when CreateJob names no target: (target_type, "input.<field>"),
    # e.g. ("knowledge_item", "input.knowledge_item_id") (seed 003 targetType, targetId).
    default_target: tuple[str, str] | None = None

    def validate_input(self, raw: dict[str, Any]) -> BaseModel:
        """The input as the definition's model, or InvalidInput naming every bad field."""
        try:
            return self.input_model.model_validate(raw)
        except ValidationError as exc:
            violations = [
                FieldViolation(field=".".join(["input", *problem.loc]), description=problem.message)
                for problem in validation_problems(exc)
            ]
            raise InvalidInput(
                f"input does not match the {self.job_type} schema", violations
            ) from None

    def withheld_fields(self) -> tuple[str, ...]:
        """The declared input fields a snapshot never holds, in declaration order: those
        outside ``snapshot_fields`` and those named or marked secret."""
        allowed = self.snapshot_fields
        return tuple(
            name
            for name, info in self.input_model.model_fields.items()
            if (allowed is not None and name not in allowed)
            or SECRET_NAME.search(name)
            or (isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("secret"))
        )
