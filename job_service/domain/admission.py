"""Admission: the one gate of a new job. CreateJob, each item of CreateJobs, a schedule's
slot, a child a result projects and a re-run all pass the same checks here, in CreateJob's
order, and are refused with CreateJob's errors (InvalidInput or UnknownJobType, naming the
field). What passes is the job to store (``NewJob``), or for a re-run, which copies its
job, what it takes from the current definition (``RetrySpec``).

Pure: the one check that needs storage (a user's credential is the user's own) is the
caller's, between ``screen`` and ``admit``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from job_service.domain.checks import (
    MAX_ID_CHARS,
    is_uuid,
    require_deadline,
    require_input,
    require_job_type,
    require_name,
    require_priority,
    require_schedule,
    require_target,
)
from job_service.domain.declared_types import JobTypes
from job_service.domain.dependencies import (
    NONE,
    UNTIL_DEPENDENCIES_END,
    Dependencies,
    require_dependencies,
)
from job_service.domain.job_types import JobType
from job_service.domain.jobs import Job, NewJob, RetrySpec
from shared.ai.prompts import PromptNotFound, get_prompt
from shared.canonical import content_hash
from shared.credentials import CredentialMode
from shared.dependencies import DependencyPolicy
from shared.errors import FieldViolation, InvalidInput
from shared.execution import ChildJobDraft


@dataclass(frozen=True)
class Pins:
    """CreateJob's optional target and version overrides (seed 000 §2.4): what the job is
    about, and the prompt and output schema versions it runs with instead of the
    definition's current ones."""

    target_type: str = ""
    target_id: str = ""
    prompt_version: str = ""
    output_schema_version: str = ""


@dataclass(frozen=True)
class CreateRequest:
    """One CreateJob request, as CreateJob, each item of CreateJobs and a schedule's slot
    take it."""

    user_id: str
    job_type: str
    raw_input: dict[str, Any]
    idempotency_key: str = ""
    priority: int | None = None
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str = ""
    run_at: datetime | None = None
    delay_s: float | None = None
    pins: Pins = Pins()
    # the jobs it waits for (fan-in), and what a failed one does to it (None: unset)
    depends_on: tuple[str, ...] = ()
    dependency_policy: DependencyPolicy | None = None
    # when the job ends DEADLINE_EXCEEDED if unfinished (None: its type's default, if any)
    deadline: datetime | None = None


@dataclass(frozen=True)
class Screened:
    """A request whose fields passed: its definition, when it is due (None: now), and the
    user credential (its canonical id) the caller must still find to be the user's own
    (None: the platform's key), and its deadline (the request's, else its type's default;
    None: none)."""

    request: CreateRequest
    definition: JobType
    due: datetime | None
    credential_id: str | None
    dependencies: Dependencies = NONE
    deadline: datetime | None = None


def screen(registry: JobTypes, request: CreateRequest, now: datetime) -> Screened:
    """CreateJob's checks of ``request`` made ``now``, in CreateJob's order, but for the
    input's schema (``admit``): names, job type, priority, run time, dependencies, input,
    target, pinned versions, credential mode. That the dependencies are jobs of the user is
    the caller's to check, with the credential's."""
    require_name("user_id", request.user_id)
    if request.idempotency_key:
        require_name("idempotency_key", request.idempotency_key)
    require_job_type(request.job_type)
    definition = registry.get(request.job_type)
    require_priority(request.priority)
    due = require_schedule(request.run_at, request.delay_s, now)
    deadline = require_deadline(request.deadline, due, now) or default_deadline(
        definition, due or now
    )
    dependencies = require_dependencies(
        request.depends_on,
        request.dependency_policy,
        scheduled=request.run_at is not None or bool(request.delay_s),
    )
    require_input(request.raw_input)
    pins = request.pins
    require_target(pins.target_type, pins.target_id)
    if bool(pins.target_type) != bool(pins.target_id):
        raise InvalidInput(
            "a target is a type and an id",
            [FieldViolation("target_id", "required with target_type")],
        )
    _require_versions(definition, pins)
    credential_id = _credential(definition, request.credential_mode, request.credential_id)
    return Screened(request, definition, due, credential_id, dependencies, deadline)


def default_deadline(definition: JobType, start: datetime) -> datetime | None:
    """The deadline a job of ``definition`` that becomes due at ``start`` gets when its
    request names none: its type's ``deadline_seconds`` later (None: no default)."""
    if definition.deadline_s is None:
        return None
    return start + timedelta(seconds=definition.deadline_s)


def admit(screened: Screened) -> NewJob:
    """The job a screened request asks for, its input validated by its definition (its
    credential, if any, found to be the user's)."""
    r = screened.request
    return _new_job(
        screened.definition,
        r.raw_input,
        r.user_id,
        r.idempotency_key,
        r.priority,
        r.credential_mode,
        screened.credential_id,
        screened.due,
        r.pins,
        _requested_time(r.run_at, r.delay_s, r.deadline),
        screened.dependencies,
        screened.deadline,
    )


def _requested_time(
    run_at: datetime | None, delay_s: float | None, deadline: datetime | None
) -> dict[str, Any]:
    """When a request asks its job to run, as its request hash takes it: ``run_at`` as
    given (in UTC), or ``delay`` as given (seconds) — never the due time it resolves to, so
    a request with a relative delay sent again later (a client's retry after a lost
    answer) is still the same request — and its ``deadline`` (in UTC). No time and a zero
    delay both mean now: they add nothing, so the hash of a request without a time is what
    it always was (a type's default deadline is not the request's)."""
    times: dict[str, Any] = {}
    if run_at is not None:
        times["run_at"] = run_at.astimezone(UTC).isoformat()
    elif delay_s:
        times["delay_s"] = delay_s
    if deadline is not None:
        times["deadline"] = deadline.astimezone(UTC).isoformat()
    return times


def admit_child(definition: JobType, draft: ChildJobDraft, now: datetime | None = None) -> NewJob:
    """A child a result projects ``now`` (None: this moment), held to CreateJob's checks of
    what it carries: its idempotency key (required), priority and input. Its user is its
    parent's (filled in when it is stored, as is its parent's credential when it inherits
    it); it is due now, pins nothing and has its type's default deadline — a join
    (``depends_on_keys``) once its siblings have ended: it waits like a dependent job, its
    siblings' ids found when it is stored."""
    require_name("idempotency_key", draft.idempotency_key)
    require_priority(draft.priority)
    require_input(draft.input)
    job = _new_job(
        definition,
        draft.input,
        "",
        draft.idempotency_key,
        draft.priority,
        deadline_at=default_deadline(definition, now or datetime.now(UTC)),
    )
    if not draft.depends_on_keys:
        return job
    return replace(
        job,
        next_run_at=UNTIL_DEPENDENCIES_END,
        dependencies=Dependencies((), draft.dependency_policy),
    )


def readmit(registry: JobTypes, job: Job, stored_input: dict[str, Any]) -> RetrySpec:
    """A re-run of ``job``, which copies it, held to CreateJob's checks of what it copies:
    the user, the job type, the priority, the stored input as it is (a snapshot of the
    allowed fields: not validated again) and the prompt version. Its output schema version
    is kept as its job had it, even when the definition has moved on since. What the re-run
    takes from the current definition instead."""
    require_name("user_id", job.user_id)
    definition = registry.get(job.job_type)
    require_priority(job.priority)
    require_input(stored_input)
    if job.prompt_version:
        _require_prompt(job.job_type, job.prompt_key or "", job.prompt_version)
    return RetrySpec(
        max_attempts=definition.max_attempts,
        timeout_ms=int(definition.timeout_s * 1000),
        definition_version=definition.version,
        snapshot_ttl_s=definition.snapshot_ttl_s,
        deadline_s=definition.deadline_s,
    )


def unknown_credential() -> InvalidInput:
    """The refusal of a credential id that names none of the user's credentials."""
    return InvalidInput(
        "no such credential for this user",
        [FieldViolation("credential_id", "the id of one of this user's credentials")],
    )


def _credential(definition: JobType, mode: CredentialMode, credential_id: str) -> str | None:
    """The key a job may run with: allowed by its type, and an id with a user key only.
    The credential's canonical id, or None for the platform's key."""
    if mode not in definition.credential_modes:
        allowed = ", ".join(m.value for m in definition.credential_modes)
        raise InvalidInput(
            f"job type {definition.job_type} does not run with a {mode} key",
            [FieldViolation("credential_mode", f"{definition.job_type} allows: {allowed}")],
        )
    if mode is CredentialMode.PLATFORM:
        if credential_id:
            raise InvalidInput(
                "credential_id is only for user keys",
                [FieldViolation("credential_id", "only with CREDENTIAL_MODE_USER")],
            )
        return None
    if not credential_id:
        raise InvalidInput(
            "a user key needs credential_id",
            [FieldViolation("credential_id", "required with CREDENTIAL_MODE_USER")],
        )
    if not is_uuid(credential_id):
        raise unknown_credential()
    return str(uuid.UUID(credential_id))


def _require_versions(definition: JobType, pins: Pins) -> None:
    """Pinned versions must be ones this deployment knows: a registered version of the
    definition's prompt, and the output schema version its output model describes."""
    if pins.prompt_version:
        _require_prompt(definition.job_type, definition.prompt_key, pins.prompt_version)
    if pins.output_schema_version and pins.output_schema_version != (
        definition.output_schema_version
    ):
        raise InvalidInput(
            f"unknown output schema version for {definition.job_type}",
            [
                FieldViolation(
                    "output_schema_version",
                    f"{definition.job_type} produces version {definition.output_schema_version!r}",
                )
            ],
        )


def _require_prompt(job_type: str, prompt_key: str, version: str) -> None:
    if prompt_key and _prompt_known(prompt_key, version):
        return
    raise InvalidInput(
        f"unknown prompt version for {job_type}",
        [
            FieldViolation(
                "prompt_version",
                f"a registered version of prompt {prompt_key!r}"
                if prompt_key
                else f"{job_type} has no prompt",
            )
        ],
    )


def _prompt_known(key: str, version: str) -> bool:
    try:
        get_prompt(key, version)
    except PromptNotFound:
        return False
    return True


def _new_job(
    definition: JobType,
    raw_input: dict[str, Any],
    user_id: str,
    idempotency_key: str,
    priority: int | None,
    credential_mode: CredentialMode = CredentialMode.PLATFORM,
    credential_id: str | None = None,
    next_run_at: datetime | None = None,
    pins: Pins | None = None,
    requested_time: dict[str, Any] | None = None,
    dependencies: Dependencies = NONE,
    deadline_at: datetime | None = None,
) -> NewJob:
    """A job of ``definition`` with its input validated (InvalidInput naming every bad
    field), due at ``next_run_at`` (None: now), with the target and versions ``pins``
    names, else the definition's. ``requested_time``: when the request asked it to run,
    as the request hash takes it (``_requested_time``)."""
    pins = pins or Pins()
    validated = definition.validate_input(raw_input)
    target = (
        (pins.target_type, pins.target_id) if pins.target_type else definition.target_of(validated)
    )
    fairness_key, concurrency_key = definition.scheduling_keys(validated, user_id)
    snapshot = definition.snapshot(validated)
    effective_priority = definition.default_priority if priority is None else priority
    # what "the same request" means for an idempotency key: every field that changes the
    # job (job_service.proto, CreateJobRequest, lists them)
    request: dict[str, Any] = {
        "job_type": definition.job_type,
        "input": validated,
        "priority": effective_priority,
        **(requested_time or {}),
    }
    if credential_id is not None:  # platform jobs hash as they always did
        request["credential_id"] = credential_id
    # so do jobs without a target or pinned versions
    if pins.target_type:
        request["target"] = [pins.target_type, pins.target_id]
    if pins.prompt_version:
        request["prompt_version"] = pins.prompt_version
    if pins.output_schema_version:
        request["output_schema_version"] = pins.output_schema_version
    if dependencies:  # and jobs without dependencies
        request["depends_on"] = list(dependencies.job_ids)
        request["dependency_policy"] = dependencies.policy.value
        next_run_at = UNTIL_DEPENDENCIES_END
    return NewJob(
        user_id=user_id,
        job_type=definition.job_type,
        queue=definition.queue,
        priority=effective_priority,
        idempotency_key=idempotency_key or None,
        request_hash=content_hash(request),
        max_attempts=definition.max_attempts,
        timeout_ms=int(definition.timeout_s * 1000),
        input_schema_version=definition.input_schema_version,
        output_schema_version=pins.output_schema_version or definition.output_schema_version,
        definition_version=definition.version,
        snapshot=snapshot,
        snapshot_hash=content_hash(snapshot),
        snapshot_ttl_s=definition.snapshot_ttl_s,
        prompt_key=definition.prompt_key or None,
        prompt_version=pins.prompt_version or definition.prompt_version or None,
        model_tier=definition.model_tier or None,
        credential_mode=credential_mode,
        credential_id=credential_id,
        fairness_key=fairness_key,
        concurrency_key=concurrency_key,
        concurrency_limit=definition.concurrency_limit if concurrency_key else None,
        next_run_at=next_run_at,
        target_type=target[0] if target else None,
        target_id=target[1][:MAX_ID_CHARS] if target else None,
        redaction_version=definition.redaction_version,
        dependencies=dependencies,
        deadline_at=deadline_at,
    )
