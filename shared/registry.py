"""Job definitions: what each job type is, validated once at registration.

Both services read the same registry: the job service to validate input and route jobs, the
worker to run them. A job type is one module that builds a ``JobDefinition`` and registers
it (see ``shared.jobtypes``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.errors import FieldViolation, InvalidInput, UnknownJobType

JOB_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_]{1,63}")
MIN_TIMEOUT_S = 1.0
MAX_TIMEOUT_S = 600.0
MAX_ATTEMPTS = 100


class AbortStrategy(StrEnum):
    """What a timed-out attempt leads to."""

    FAIL = "fail"
    RETRY = "retry"


@dataclass(frozen=True)
class ArtifactDraft:
    """A piece of a result, stored once per (artifact_type, artifact_id)."""

    artifact_type: str
    artifact_id: str
    payload: dict[str, Any]
    ordinal: int = 0


@dataclass(frozen=True)
class JobResult:
    output: BaseModel
    artifacts: list[ArtifactDraft] = field(default_factory=list)


class ExecutionContext(Protocol):
    """What job code may know and do while it runs."""

    @property
    def job_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    def report_progress(self, fraction: float) -> None: ...

    async def api_key(self) -> str | None:
        """The provider key this attempt must use: the job owner's own key (fetched from
        the job service under the attempt's lease, at most once), or None for the platform's
        key. Secret: pass it to the provider only; never log, return or store it."""
        ...


Execute = Callable[[Any, ExecutionContext], Awaitable[JobResult]]


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
    # Whose provider keys a job of this type may run with (CreateJob's credential_mode).
    credential_modes: tuple[CredentialMode, ...] = (CredentialMode.PLATFORM,)

    def validate_input(self, raw: dict[str, Any]) -> BaseModel:
        """The input as the definition's model, or InvalidInput naming every bad field."""
        try:
            return self.input_model.model_validate(raw)
        except ValidationError as exc:
            violations = [
                FieldViolation(
                    field=".".join(["input", *(str(p) for p in err["loc"])]),
                    description=err["msg"],
                )
                for err in exc.errors()
            ]
            raise InvalidInput(
                f"input does not match the {self.job_type} schema", violations
            ) from None

    def snapshot(self, validated: BaseModel) -> dict[str, Any]:
        """What the executor may see: the declared fields only, secrets dropped."""
        secret = {
            name
            for name, info in self.input_model.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("secret")
        }
        return validated.model_dump(mode="json", exclude=secret)


class DefinitionError(ValueError):
    """A definition that cannot be registered."""


class Registry:
    """The job types this deployment knows, by name."""

    def __init__(self, definitions: Iterable[JobDefinition] = ()) -> None:
        self._definitions: dict[str, JobDefinition] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: JobDefinition) -> None:
        problems = _problems(definition)
        if definition.job_type in self._definitions:
            problems.append(f"job type {definition.job_type!r} is already registered")
        if problems:
            raise DefinitionError("; ".join(problems))
        self._definitions[definition.job_type] = definition

    def get(self, job_type: str) -> JobDefinition:
        try:
            return self._definitions[job_type]
        except KeyError:
            raise UnknownJobType(
                f"unknown job type {job_type!r}",
                [FieldViolation("job_type", "is not a registered job type")],
            ) from None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._definitions.values())

    def queue_concurrency(self) -> dict[str, int]:
        """Worker slots per queue: the largest concurrency of the queue's job types."""
        slots: dict[str, int] = {}
        for definition in self:
            slots[definition.queue] = max(slots.get(definition.queue, 0), definition.concurrency)
        return slots


def _problems(d: JobDefinition) -> list[str]:
    problems = []
    if not JOB_TYPE_PATTERN.fullmatch(d.job_type):
        problems.append(f"job type {d.job_type!r} must match ^{JOB_TYPE_PATTERN.pattern}$")
    if d.queue not in set(Queue):
        problems.append(f"unknown queue {d.queue!r}")
    if not MIN_TIMEOUT_S <= d.timeout_s <= MAX_TIMEOUT_S:
        problems.append(f"timeout {d.timeout_s}s is outside {MIN_TIMEOUT_S}-{MAX_TIMEOUT_S}s")
    if not 1 <= d.max_attempts <= MAX_ATTEMPTS:
        problems.append(f"max_attempts must be within 1..{MAX_ATTEMPTS}")
    if d.concurrency < 1:
        problems.append("concurrency must be at least 1")
    if d.backoff_base_s <= 0 or d.backoff_max_s < d.backoff_base_s:
        problems.append("backoff must satisfy 0 < base <= max")
    if not d.credential_modes or not all(isinstance(m, CredentialMode) for m in d.credential_modes):
        problems.append("credential_modes must name at least one CredentialMode")
    return problems


def default_registry() -> Registry:
    """The job types shipped with the product."""
    from shared.jobtypes import synthetic

    return Registry([synthetic.DEFINITION])
