"""A job as the use cases and the stores exchange it: a new one (validated, with its
snapshot), one stored (with its timeline, artifacts and hold), a re-run's spec. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from job_service.domain.dependencies import NONE, Dependencies
from job_service.domain.holds import Hold
from job_service.domain.ids import new_job_id
from job_service.domain.lifecycle import JobStatus
from job_service.domain.signals import ReceivedSignal
from shared.credentials import CredentialMode


@dataclass(frozen=True)
class NewJob:
    """A validated CreateJob, ready to be stored with its snapshot and dispatch row."""

    user_id: str
    job_type: str
    queue: str
    priority: int
    idempotency_key: str | None
    request_hash: str
    max_attempts: int
    timeout_ms: int
    input_schema_version: str
    output_schema_version: str
    definition_version: str
    snapshot: dict[str, Any]
    snapshot_hash: str
    snapshot_ttl_s: float = 30 * 24 * 3600.0
    prompt_key: str | None = None
    prompt_version: str | None = None
    model_tier: str | None = None
    # The W3C trace context of the CreateJob span (tracing on), carried by the outbox row.
    trace: dict[str, str] | None = None
    # a user's key by id only; checked to be the user's before the job is stored
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str | None = None
    # Scheduling: the fair-share and concurrency keys (a child's user-scoped key reads
    # "{user}"), the key's limit, and when a delayed job becomes due (None: now).
    fairness_key: str | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    next_run_at: datetime | None = None
    # What the job is about (seed 003 targetType, targetId), and the definition's redaction
    # rules version its snapshot is built under.
    target_type: str | None = None
    target_id: str | None = None
    redaction_version: str = "1"
    # The principal whose CreateJob call created it (its bearer token's); None for a child
    # job, a retry or a job created before migration 0010.
    created_by: str | None = None
    # A schedule's job: the schedule and the slot it is for (its trigger is "schedule").
    schedule_id: str | None = None
    scheduled_for: datetime | None = None
    # The jobs it waits for (then it is due at UNTIL_DEPENDENCIES_END until they end). A
    # join a result projects names its siblings by idempotency key instead (NewChild).
    dependencies: Dependencies = NONE
    # Its id, made here (a version-7 UUID, as the database's default would): a sealed
    # payload is bound to its job's id before the job is stored.
    id: str = field(default_factory=new_job_id)
    # With payloads sealed, ``request_hash`` is keyed by the user's data key; this is the
    # plain one, which a job created before encryption stored (an idempotent repeat).
    legacy_request_hash: str = ""
    # The user's data key (as stored: wrapped) its payloads were sealed under, None when not
    # sealed: the store creates the job only while the user's key row still holds it.
    sealed_under: bytes | None = None
    # When it ends DEADLINE_EXCEEDED if unfinished (CreateJob's deadline, else its type's
    # default); None: never.
    deadline_at: datetime | None = None


class DataKeyChanged(Exception):
    """The user's data key is no longer the one a new job was sealed under (an erase on
    another replica destroyed it, or a rotation re-wrapped it): nothing was stored; seal it
    again under the current key and store it again."""


@dataclass(frozen=True)
class ShownLists:
    """How much of a job's lists one read of it shows: one user can grow a job (signals,
    retried children) but never its answer past gRPC's default 4 MiB message limit. The
    job's totals say what was left out."""

    # in ordinal order; SubmitResults stores no more per job (``MAX_ARTIFACTS_PER_JOB``)
    artifacts: int = 1000
    # ... and only while their payloads' JSON text (as PostgreSQL prints jsonb, at most
    # 1.5x the canonical form) adds up to this: every result stored within
    # MAX_ARTIFACT_BYTES_PER_JOB shows whole; older, larger ones are cut
    artifact_bytes: int = 768 * 1024
    # the newest, oldest first
    events: int = 200
    # the oldest
    child_jobs: int = 1000
    # the newest, in send order
    signals: int = 200
    # the input, whole when its JSON text (as PostgreSQL prints jsonb) is at most this
    # long; otherwise only its size (Job.input_state TOO_LARGE)
    input_bytes: int = 64 * 1024
    # the oldest retries made from the job
    retries: int = 100
    # the first durable steps, in order
    steps: int = 200


SHOWN = ShownLists()
# What one job's result may store as artifacts: how many, and their canonical JSON in all
# (type, id and payload). A projection past either fails its attempt. The byte limit is
# low because protobuf's Struct is up to 5.5x larger than JSON (a list of small numbers:
# 11 bytes per element against 2), and GetJob must stay within 4 MiB.
MAX_ARTIFACTS_PER_JOB = SHOWN.artifacts
MAX_ARTIFACT_BYTES_PER_JOB = 512 * 1024
# An artifact's type: a short name (its id is at most checks.MAX_ID_CHARS).
MAX_ARTIFACT_TYPE_CHARS = 64


@dataclass(frozen=True)
class DurableStep:
    """A durable step of a job as its owner sees it: no value."""

    ordinal: int
    name: str
    attempt: int
    recorded_at: datetime
    error_code: str | None = None


@dataclass(frozen=True)
class NewChild:
    """A validated child job of a projection; it belongs to its parent's user."""

    parent_job_id: str
    job: NewJob
    # The child runs with its parent's key (a user's own key too) when its type allows
    # user keys; otherwise with the platform's.
    inherits_credential: bool = False
    # A join: the siblings (job type, idempotency key) it waits for; its policy is its
    # job's ``dependencies.policy``.
    siblings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Artifact:
    artifact_type: str
    artifact_id: str
    ordinal: int
    payload: dict[str, Any]


class InputState(StrEnum):
    """Whether a read of a job shows its input (its snapshot), and why not."""

    SHOWN = "shown"
    TOO_LARGE = "too_large"
    # removed with its snapshot, the type's snapshot TTL after the job was created
    REMOVED = "removed"


@dataclass(frozen=True)
class JobEvent:
    from_status: JobStatus | None
    to_status: JobStatus
    attempt: int
    reason: str | None
    at: datetime
    # the worker whose lease it happened under (None: no worker's step)
    worker_id: str | None = None


@dataclass(frozen=True)
class Job:
    """A job record as stored (with its artifacts and timeline when read whole)."""

    id: str
    user_id: str
    job_type: str
    status: JobStatus
    queue: str
    priority: int
    attempt_count: int
    max_attempts: int
    idempotency_key: str | None
    request_hash: str
    progress: float
    validated_output: dict[str, Any] | None
    output_hash: str | None
    error_code: str | None
    public_error_message: str | None
    internal_error_message: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    next_run_at: datetime | None
    artifacts: list[Artifact] = field(default_factory=list)
    events: list[JobEvent] = field(default_factory=list)
    parent_job_id: str | None = None
    child_job_ids: list[str] = field(default_factory=list)
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    total_cost_usd: Decimal = Decimal(0)
    # attempts ended by lease expiry whose provider calls were not reported (GetJob only)
    usage_unknown_attempts: int = 0
    prompt_key: str | None = None
    prompt_version: str | None = None
    model_tier: str | None = None
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str | None = None
    # What created it ("api", "retry", "child_job") and the job it was retried from.
    trigger: str = "api"
    retried_from_job_id: str | None = None
    # The definition version it is pinned to, and the concurrency key it counts against.
    definition_version: str = ""
    concurrency_key: str | None = None
    # Why it waits (admin reads of a waiting job; every read of one waiting for
    # dependencies).
    hold: Hold | None = None
    # What it is about; the output schema version it was created with; the provider and
    # model of its last provider call (None before any).
    target_type: str | None = None
    target_id: str | None = None
    output_schema_version: str = ""
    model_provider: str | None = None
    model_name: str | None = None
    # The principal that created it (operators only: AdminService answers).
    created_by: str | None = None
    # The schedule that created it and the slot it was for (trigger "schedule").
    schedule_id: str | None = None
    scheduled_for: datetime | None = None
    # The signals it received, in send order (GetJob only; names and times, no payloads).
    signals: list[ReceivedSignal] = field(default_factory=list)
    # How long each list is in full, when it was read (GetJob): the lists above hold at
    # most ``SHOWN`` of it; 0 where the lists were not read (ListJobs summaries).
    artifacts_total: int = 0
    events_total: int = 0
    child_jobs_total: int = 0
    signals_total: int = 0
    # Dependencies (GetJob): the jobs it waits for and the jobs waiting for it (the first
    # SHOWN_EDGES of each by id), their totals, how many it still waits for, its policy.
    depends_on: list[str] = field(default_factory=list)
    dependencies_total: int = 0
    dependencies_pending: int = 0
    dependency_policy: str | None = None
    dependent_job_ids: list[str] = field(default_factory=list)
    dependents_total: int = 0
    # The worker that holds its lease or held it last (None before any attempt).
    worker_id: str | None = None
    # The operator's view (GetJob): its input (the snapshot; None unless SHOWN), whether it
    # is shown, its size, and the declared input fields never stored (from its type); the
    # retries made from it (the first ``SHOWN.retries``); the attempt its error is of.
    input: dict[str, Any] | None = None
    input_state: InputState | None = None
    input_bytes: int = 0
    input_withheld_fields: tuple[str, ...] = ()
    retried_as_job_ids: list[str] = field(default_factory=list)
    error_attempt: int = 0
    # when it ends DEADLINE_EXCEEDED if unfinished; None: never
    deadline_at: datetime | None = None
    # its durable steps as recorded (GetJob: the first ``SHOWN.steps``), and how many
    steps: list[DurableStep] = field(default_factory=list)
    steps_total: int = 0


@dataclass(frozen=True)
class RetrySpec:
    """What a retried job takes from today's definition of its type."""

    max_attempts: int
    timeout_ms: int
    definition_version: str
    snapshot_ttl_s: float
    # the type's default deadline, counted from the re-run's creation (None: none)
    deadline_s: float | None = None
