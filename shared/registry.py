"""Job definitions: what each job type is, validated once at registration.

Both services read the same registry: the job service to validate input and route jobs, the
worker to run them. A job type is one module that builds a ``JobDefinition`` and registers
it; a deployment finds them through the ``durable_jobs.job_types`` entry-point group (the
shipped ones are in the ``jobtypes`` package).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from shared.ai.provider import ModelTier
from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.dependencies import DependencyOutput as DependencyOutput  # re-exported
from shared.dependencies import DependencyPolicy as DependencyPolicy  # re-exported
from shared.errors import FieldViolation, InvalidInput, UnknownJobType
from shared.validation import validation_problems

if TYPE_CHECKING:
    from shared.ai.prompts import RenderedPrompt
    from shared.ai.provider import ProviderResponse

JOB_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_]{1,63}")
MIN_TIMEOUT_S = 1.0
MAX_TIMEOUT_S = 600.0
MAX_ATTEMPTS = 100
# Job types shipped and installed: modules listed under this entry-point group (each with a
# DEFINITION or DEFINITIONS), plus JOBS_JOB_TYPE_MODULES (comma-separated module names).
ENTRY_POINT_GROUP = "durable_jobs.job_types"
MODULES_ENV = "JOBS_JOB_TYPE_MODULES"
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
class ArtifactDraft:
    """A piece of a result, stored once per (artifact_type, artifact_id)."""

    artifact_type: str
    artifact_id: str
    payload: dict[str, Any]
    ordinal: int = 0


@dataclass(frozen=True)
class ChildJobDraft:
    """A job a projection creates, committed in the same transaction as its parent's
    result. The idempotency key makes it at most one per (parent's user, type, key).
    A join (fan-in) names the siblings it waits for by their idempotency keys."""

    job_type: str
    input: dict[str, Any]
    idempotency_key: str
    priority: int | None = None
    depends_on_keys: tuple[str, ...] = ()
    dependency_policy: DependencyPolicy = DependencyPolicy.FAIL


@dataclass(frozen=True)
class JobResult:
    output: BaseModel
    artifacts: list[ArtifactDraft] = field(default_factory=list)
    children: list[ChildJobDraft] = field(default_factory=list)


class ExecutionContext(Protocol):
    """What job code may know and do while it runs."""

    @property
    def job_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def user_id(self) -> str: ...

    @property
    def prompt(self) -> tuple[str, str]:
        """(prompt_key, prompt_version) the job was created with; ("", "") if none."""
        ...

    def report_progress(self, fraction: float) -> None: ...

    async def generate(
        self, tier: ModelTier, prompt: RenderedPrompt, *, step: str = ""
    ) -> ProviderResponse:
        """One model call through the provider the tier routes to; its usage is recorded
        with the attempt whether it succeeds or not. A named ``step`` (a-z, 0-9, _) is
        checkpointed: its response is recorded before the call returns, and a later
        attempt of the job gets that response back without a call (once per step and
        attempt: asking for the same step again calls the provider, e.g. to repair an
        answer that failed validation)."""
        ...

    async def api_key(self) -> str | None:
        """The provider key this attempt must use: the job owner's own key (fetched from
        the job service under the attempt's lease, at most once), or None for the platform's
        key. Secret: pass it to the provider only; never log, return or store it."""
        ...

    async def signal(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        """The payload of the next signal named ``name`` sent to this job
        (JobService.SendSignal), waiting up to ``timeout`` seconds (None: as long as the
        attempt may run); TimeoutError when none came. Signals come in send order, each
        once per attempt; a signal sent before the job started is waiting for it, and a
        retried attempt receives every signal again."""
        ...

    async def poll_signal(self, name: str) -> dict[str, Any] | None:
        """The payload of the next signal named ``name`` if one has arrived (each once per
        attempt, in send order), else None; never waits for one."""
        ...

    async def dependency_results(self) -> list[DependencyOutput]:
        """The results of the jobs this one depended on (CreateJob's ``depends_on`` or a
        join's siblings), in job id order, fetched page by page under the attempt's lease;
        empty for a job without dependencies."""
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
    # What a job is about when CreateJob names no target: (target_type, "input.<field>"),
    # e.g. ("knowledge_item", "input.knowledge_item_id") (seed 003 targetType, targetId).
    default_target: tuple[str, str] | None = None

    def target_of(self, validated: BaseModel) -> tuple[str, str] | None:
        """The default target of a job with this input, or None."""
        if self.default_target is None:
            return None
        target_type, spec = self.default_target
        value = getattr(validated, spec.removeprefix("input."), None)
        return (target_type, str(value)) if value not in (None, "") else None

    def scheduling_keys(self, validated: BaseModel, user_id: str) -> tuple[str, str | None]:
        """The job's fairness key and concurrency key (None without a limit). A user-scoped
        key of a child job, whose user the job service fills in, reads "{user}"."""
        fairness = _key_value(self.fairness_key, validated, user_id)
        if not self.concurrency_key:
            return fairness, None
        return fairness, f"{self.job_type}:{self.concurrency_key}=" + _key_value(
            self.concurrency_key, validated, user_id
        )

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

    def snapshot(self, validated: BaseModel) -> dict[str, Any]:
        """What the executor may see: the allow-listed declared fields only, secrets
        (by marking or by name) dropped; undeclared extras never enter."""
        excluded = set(self.withheld_fields())
        data = validated.model_dump(mode="json", exclude=excluded)
        return {k: v for k, v in data.items() if k in self.input_model.model_fields}

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


KEY_SPEC = re.compile(r"user|input\.[A-Za-z_][A-Za-z0-9_]{0,63}")


def _key_value(spec: str, validated: BaseModel, user_id: str) -> str:
    if spec == "user":
        return user_id or "{user}"
    return str(getattr(validated, spec.removeprefix("input.")))


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
    if d.model_tier and d.model_tier not in set(ModelTier):
        problems.append(f"unknown model tier {d.model_tier!r}")
    if bool(d.prompt_key) != bool(d.prompt_version):
        problems.append("prompt_key and prompt_version go together")
    if d.snapshot_ttl_s <= 0:
        problems.append("snapshot_ttl_s must be positive")
    if not d.credential_modes or not all(isinstance(m, CredentialMode) for m in d.credential_modes):
        problems.append("credential_modes must name at least one CredentialMode")
    return problems + _scheduling_problems(d)


def _scheduling_problems(d: JobDefinition) -> list[str]:
    problems = []
    for name, spec in (("fairness_key", d.fairness_key), ("concurrency_key", d.concurrency_key)):
        if not spec and name == "concurrency_key":
            continue
        if not KEY_SPEC.fullmatch(spec):
            problems.append(f"{name} must be 'user' or 'input.<field>', not {spec!r}")
        elif spec.startswith("input.") and spec[6:] not in d.input_model.model_fields:
            problems.append(f"{name} names {spec[6:]!r}, which is not an input field")
    if bool(d.concurrency_key) != (d.concurrency_limit > 0):
        problems.append("concurrency_key and a positive concurrency_limit go together")
    if d.estimated_tokens < 0:
        problems.append("estimated_tokens must not be negative")
    return problems + _lifecycle_problems(d)


def _lifecycle_problems(d: JobDefinition) -> list[str]:
    problems = []
    unknown = sorted(d.output_redaction - set(d.output_model.model_fields))
    if unknown:
        problems.append(f"output_redaction names fields the output lacks: {unknown}")
    if not d.redaction_version or len(d.redaction_version) > 32:
        problems.append("redaction_version must be 1..32 characters")
    if d.retention_s is not None and d.retention_s < 0:
        problems.append("retention_s must not be negative")
    if d.default_target is not None:
        target_type, spec = d.default_target
        if not JOB_TYPE_PATTERN.fullmatch(target_type) or len(target_type) > 32:
            problems.append(f"default_target type {target_type!r} must be a short name")
        if not spec.startswith("input.") or spec[6:] not in d.input_model.model_fields:
            problems.append(f"default_target names {spec!r}, which is not an input field")
    return problems


def default_registry(env: dict[str, str] | None = None) -> Registry:
    """The job types of this deployment: every module of the ``durable_jobs.job_types``
    entry-point group (the shipped types in ``jobtypes`` register this way, as an installed
    plug-in would), and the modules named in JOBS_JOB_TYPE_MODULES."""
    registry = Registry()
    modules = [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)]
    configured = (env if env is not None else os.environ).get(MODULES_ENV, "")
    modules += [m.strip() for m in configured.split(",") if m.strip()]
    for name in dict.fromkeys(modules):
        for definition in definitions_in(name):
            registry.register(definition)
    return registry


def definitions_in(module_name: str) -> list[JobDefinition]:
    """The DEFINITION / DEFINITIONS a job-type module exports."""
    module = importlib.import_module(module_name)
    found = getattr(module, "DEFINITIONS", None) or [getattr(module, "DEFINITION", None)]
    definitions = [d for d in found if isinstance(d, JobDefinition)]
    if not definitions:
        raise DefinitionError(f"module {module_name} exports no DEFINITION or DEFINITIONS")
    return definitions
