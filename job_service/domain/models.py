"""Plain values the use cases and the store exchange. No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from job_service.domain.holds import Hold
from job_service.domain.lifecycle import JobStatus
from shared.ai.provider import UsageRecord
from shared.ai.steps import RecordedStep
from shared.credentials import CredentialMode
from shared.registry import ArtifactDraft, ChildJobDraft


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


@dataclass(frozen=True)
class NewChild:
    """A validated child job of a projection; it belongs to its parent's user."""

    parent_job_id: str
    job: NewJob
    # The child runs with its parent's key (a user's own key too) when its type allows
    # user keys; otherwise with the platform's.
    inherits_credential: bool = False


@dataclass(frozen=True)
class Artifact:
    artifact_type: str
    artifact_id: str
    ordinal: int
    payload: dict[str, Any]


@dataclass(frozen=True)
class JobEvent:
    from_status: JobStatus | None
    to_status: JobStatus
    attempt: int
    reason: str | None
    at: datetime


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
    total_cost_usd: float = 0.0
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
    # Why it waits (admin reads of a waiting job only).
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


@dataclass(frozen=True)
class Quotas:
    """Per-user CreateJob limits; 0 turns one off. ``daily_cost_usd``: what a user's
    provider calls may cost per UTC day before creates are refused."""

    max_active: int = 0
    daily: int = 0
    daily_cost_usd: Decimal = Decimal(0)


@dataclass(frozen=True)
class QuotaRefusal:
    """CreateJob stored nothing: the user is at a limit (``active`` / ``today`` /
    ``spent`` — today's cost in US dollars, 0 when the budget is off — say which)."""

    active: int
    today: int
    spent: Decimal = Decimal(0)


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a listing shows; every field optional (None matches all)."""

    user_id: str | None = None
    job_type: str | None = None
    status: JobStatus | None = None
    queue: str | None = None
    created_after: datetime | None = None  # inclusive
    created_before: datetime | None = None  # exclusive
    # what the jobs are about: a type, or a type and an id
    target_type: str | None = None
    target_id: str | None = None


@dataclass(frozen=True)
class JobSelection:
    """Which jobs a bulk admin action (CancelJobs, RetryJobs) acts on: the jobs ``job_ids``
    names, or else the jobs ``where`` matches (never both; never neither)."""

    where: JobFilter = field(default_factory=JobFilter)
    job_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Actionable:
    """The jobs a bulk action would change: in one of ``statuses``, of a type not in
    ``excluded_types`` (for CancelJobs: the types that cannot be cancelled)."""

    statuses: frozenset[JobStatus]
    excluded_types: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Candidate:
    """A job a bulk action's page holds; ``actionable`` when the action would change it
    (CancelJob would cancel it, RetryJob would accept it)."""

    id: str
    created_at: datetime
    job_type: str
    status: JobStatus
    actionable: bool


@dataclass(frozen=True)
class Cursor:
    """Where a keyset page continues: strictly after this (created_at, id) in its order
    (newest first for listings, oldest first for bulk actions)."""

    created_at: datetime
    id: str


@dataclass(frozen=True)
class DeadEvent:
    """An outbox row that failed to publish too many times."""

    id: int
    job_id: str
    subject: str
    attempts: int
    last_error: str | None
    created_at: datetime


@dataclass(frozen=True)
class RetrySpec:
    """What a retried job takes from today's definition of its type."""

    max_attempts: int
    timeout_ms: int
    definition_version: str
    snapshot_ttl_s: float


@dataclass(frozen=True)
class LockGrant:
    """A lease on one attempt of a job."""

    job_id: str
    job_type: str
    lease_token: str
    attempt: int
    lease_expires_at: datetime
    input: dict[str, Any]
    user_id: str = ""
    prompt_key: str = ""
    prompt_version: str = ""
    # USER: the worker fetches the key with ResolveCredential under this lease
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str | None = None
    # Earlier attempts recorded steps (RecordStep) for this one to reuse: whether the
    # grant saw any, and (attached by the claims use case) the steps.
    has_steps: bool = False
    recorded_steps: tuple[RecordedStep, ...] = ()


@dataclass(frozen=True)
class LockRefusal:
    """LockJob found nothing to lock; ``retry_after`` is set when the job is simply not
    due yet."""

    retry_after: datetime | None = None


@dataclass(frozen=True)
class QueueClaim:
    """What a claim on a queue granted, and what to answer for the tokens it did not use:
    hand them back at ``retry_after`` (something held back may be eligible then), or drop
    them (None)."""

    grants: list[LockGrant]
    retry_after: datetime | None = None


@dataclass(frozen=True)
class HeartbeatAck:
    lease_expires_at: datetime
    cancel_requested: bool
    # the seq of the job's latest signal: a worker behind it fetches the rest
    latest_signal_seq: int = 0


@dataclass(frozen=True)
class AttemptFacts:
    """What a retry decision needs to know about the failed attempt."""

    job_id: str
    job_type: str
    status: JobStatus
    attempt: int
    # The budget the job was created with (a later definition change does not move it).
    max_attempts: int


@dataclass(frozen=True)
class FailureOutcome:
    status: JobStatus
    next_run_at: datetime | None = None


@dataclass(frozen=True)
class Submission:
    """One attempt's result, as its worker submits it."""

    job_id: str
    lease_token: str
    output: dict[str, Any]
    output_hash: str
    artifacts: Sequence[ArtifactDraft]
    children: Sequence[ChildJobDraft] = ()
    usage: Sequence[UsageRecord] = ()


@dataclass(frozen=True)
class ReceivedSignal:
    """A signal as the job's owner sees it: no payload."""

    seq: int
    name: str
    sent_at: datetime


@dataclass(frozen=True)
class JobSignal:
    """A signal as the job's code receives it."""

    seq: int
    name: str
    payload: dict[str, Any]
    sent_at: datetime


@dataclass(frozen=True)
class SentSignal:
    """SendSignal's answer: the stored signal, whether this call stored it, and the job's
    type and status then (to count it and to notify a running job's worker)."""

    signal: ReceivedSignal
    created: bool
    job_type: str
    status: JobStatus | None
