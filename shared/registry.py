"""The job types a Python worker runs: the registry, the checks a definition passes to be
registered, and loading the job-type modules.

Only the worker reads it: it runs the types and declares each to the job service as data
(``shared/job_type_specs.py``, ``worker_service/declarations.py``); the job service never
imports this module (an import-linter contract). A job type is one module that builds a
``JobDefinition`` and registers it; a deployment finds them through the
``durable_jobs.job_types`` entry-point group (the shipped ones are in the ``jobtypes``
package). This module is also the job type author's one
import path: the definition (``shared/definitions.py``) and what job code receives and
returns (``shared/execution.py``) are re-exported here.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable
from importlib.metadata import entry_points

from shared.ai.provider import ModelTier
from shared.constants import Queue
from shared.credentials import CredentialMode
from shared.definitions import AbortStrategy as AbortStrategy  # re-exported
from shared.definitions import JobDefinition as JobDefinition  # re-exported
from shared.dependencies import DependencyOutput as DependencyOutput  # re-exported
from shared.dependencies import DependencyPolicy as DependencyPolicy  # re-exported
from shared.durable_steps import MAX_DEADLINE_S
from shared.errors import FieldViolation, UnknownJobType
from shared.execution import ArtifactDraft as ArtifactDraft  # re-exported
from shared.execution import ChildJobDraft as ChildJobDraft  # re-exported
from shared.execution import ExecutionContext as ExecutionContext  # re-exported
from shared.execution import JobResult as JobResult  # re-exported

JOB_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_]{1,63}")
MIN_TIMEOUT_S = 1.0
MAX_TIMEOUT_S = 600.0
MAX_ATTEMPTS = 100
# Job types shipped and installed: modules listed under this entry-point group (each with a
# DEFINITION or DEFINITIONS), plus JOBS_JOB_TYPE_MODULES (comma-separated module names).
ENTRY_POINT_GROUP = "durable_jobs.job_types"
MODULES_ENV = "JOBS_JOB_TYPE_MODULES"
# A fairness or concurrency key: the job's owner, or one of its declared input fields.
KEY_SPEC = re.compile(r"user|input\.[A-Za-z_][A-Za-z0-9_]{0,63}")


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
    if d.deadline_s is not None and not 0 < d.deadline_s <= MAX_DEADLINE_S:
        problems.append(f"deadline_s must be within 0..{MAX_DEADLINE_S:.0f} (366 days)")
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
