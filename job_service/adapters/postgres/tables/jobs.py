"""Jobs and what goes with them (deleted with the job): snapshot, artifacts, recorded steps,
timeline events and signals."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from job_service.adapters.postgres.tables.base import metadata
from job_service.domain.lifecycle import (
    ACTIVE,
    LEASED,
    LOCKABLE,
    RERUNNABLE,
    TERMINAL,
    JobStatus,
    statuses_sql,
)
from shared.credentials import CredentialMode

_STATUSES = ", ".join(f"'{s.value}'" for s in JobStatus)
_CREDENTIAL_MODES = ", ".join(f"'{m.value}'" for m in CredentialMode)
_WAITING = f"status IN {statuses_sql(LOCKABLE)}"


jobs = Table(
    "jobs",
    metadata,
    Column("id", UUID(as_uuid=False), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("user_id", String(255), nullable=False),
    # identity and routing
    Column("job_type", String(64), nullable=False),
    Column("trigger_type", String(32), nullable=False, server_default="api"),
    Column("queue", String(64), nullable=False),
    Column("priority", SmallInteger, nullable=False, server_default="0"),
    Column("idempotency_key", String(255)),
    # sha256 of the canonical create request: a reused key must carry the same request
    Column("request_hash", String(64), nullable=False),
    Column("parent_job_id", UUID(as_uuid=False), ForeignKey("jobs.id", ondelete="SET NULL")),
    Column("retried_from_job_id", UUID(as_uuid=False)),
    # lifecycle and lease
    Column("status", String(32), nullable=False),
    Column("progress", Float, nullable=False, server_default="0"),
    Column("attempt_count", Integer, nullable=False, server_default="0"),
    Column("max_attempts", Integer, nullable=False),
    Column("timeout_ms", Integer, nullable=False),
    Column("locked_by", String(255)),
    Column("locked_at", DateTime(timezone=True)),
    Column("lock_until", DateTime(timezone=True)),
    # the fencing token of the current (or last) attempt
    Column("lease_token", UUID(as_uuid=False)),
    Column("next_run_at", DateTime(timezone=True)),
    Column("cancel_requested_at", DateTime(timezone=True)),
    Column("queued_at", DateTime(timezone=True)),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    # inputs and schema versions
    Column("input_schema_version", String(100), nullable=False),
    Column("output_schema_version", String(100), nullable=False),
    Column("definition_version", String(100), nullable=False),
    # the prompt template and model tier the job runs with (AI job types)
    Column("prompt_key", String(100)),
    Column("prompt_version", String(50)),
    Column("model_tier", String(16)),
    # errors and output
    Column("error_code", String(100)),
    Column("public_error_message", String(500)),
    Column("internal_error_message", Text),
    # "jcs:sha256:<hex>", or a bare legacy hex hash (shared/output_hash.py; migration 0011)
    Column("output_hash", String(80)),
    Column("validated_output", JSONB),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # whose provider key the job runs with; a user's key by id only (see `credentials`).
    # No foreign key: deleting a credential must not rewrite the history of its jobs.
    Column("credential_mode", String(32), nullable=False, server_default="platform"),
    Column("credential_id", UUID(as_uuid=False)),
    # scheduling (migration 0006): the place in line of a waiting job (epoch seconds, lower
    # runs first), the key fair share is kept across, the concurrency key with its limit,
    # and the tokens the current attempt reserved from its tier's rate limit
    Column("sched_key", Float(precision=53)),
    Column("fairness_key", String(255)),
    Column("concurrency_key", String(255)),
    Column("concurrency_limit", Integer),
    Column("reserved_tokens", Integer),
    # the data lifecycle (migration 0009): what the job is about (seed 003 targetType,
    # targetId; e.g. "knowledge_item" and its id), and the provider and model its last
    # provider call used (seed 003 modelProvider, modelName), from the worker's usage
    Column("target_type", String(32)),
    Column("target_id", String(255)),
    Column("model_provider", String(64)),
    Column("model_name", String(255)),
    # the caller (migration 0010): the principal whose CreateJob created the job (its
    # bearer token's name); NULL for child jobs, retries and jobs from before 0010
    Column("created_by", String(255)),
    # the schedule that created the job and the slot it was for (migration 0012); no
    # foreign key: deleting a schedule keeps its jobs and their history
    Column("schedule_id", UUID(as_uuid=False)),
    Column("scheduled_for", DateTime(timezone=True)),
    # the seq of the job's latest signal (migration 0013): SendSignal numbers signals by
    # bumping it, and the heartbeat returns it so a worker that missed a notice catches up
    Column("signal_seq", Integer, nullable=False, server_default="0"),
    # retries (migration 0017): the original job of a retry's lineage (a retry of a retry
    # keeps its source's original), and the idempotency key of the admin RetryJob that
    # made it; NULL for jobs that are no retry
    Column("retry_root_id", UUID(as_uuid=False)),
    Column("retry_key", String(255)),
    # dependencies (migration 0021): how many of its edges the dependency resolver has not
    # yet counted as ended (0: every dependency ended), and what a failed or cancelled one
    # does to it ("run", "fail", "cancel"); both NULL for a job without dependencies
    # (job_dependencies holds the edges)
    Column("dependencies_uncounted", Integer),
    Column("dependency_policy", String(8)),
    # the job's deadline (migration 0061): unfinished then, it ends DEADLINE_EXCEEDED
    # (CreateJob's deadline, or its type's deadline_seconds); NULL: none
    Column("deadline_at", DateTime(timezone=True)),
    CheckConstraint(f"status IN ({_STATUSES})", name="jobs_status_known"),
    CheckConstraint(
        f"credential_mode IN ({_CREDENTIAL_MODES})"
        " AND (credential_mode = 'user') = (credential_id IS NOT NULL)",
        name="jobs_credential_consistent",
    ),
    CheckConstraint("attempt_count >= 0", name="jobs_attempt_count_non_negative"),
    Index(
        "jobs_idempotency_unique",
        "user_id",
        "job_type",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
    Index("jobs_user_type_created", "user_id", "job_type", "created_at"),
    Index("jobs_status_created", "status", "created_at"),
    # a job's children; only child jobs have a parent, and a query asks for one (migration
    # 0026: an entry per child, not per job)
    Index("jobs_parent", "parent_job_id", postgresql_where=text("parent_job_id IS NOT NULL")),
    # ListJobs, newest first (migration 0005)
    Index("jobs_user_created_id", "user_id", "created_at", "id"),
    # the active-jobs quota: unfinished jobs only; with queue and status, the queue-depth
    # gauge reads it alone (migration 0026: it replaced jobs_queue_status_created, which
    # every version of every job's row wrote)
    Index(
        "jobs_user_active",
        "user_id",
        "queue",
        "status",
        postgresql_where=text(f"status IN {statuses_sql(ACTIVE)}"),
    ),
    # the daily cost budget: a user's jobs finished today (migration 0015)
    Index(
        "jobs_user_finished",
        "user_id",
        "finished_at",
        postgresql_where=text("finished_at IS NOT NULL"),
    ),
    # the reaper's scan: only leased jobs, by expiry
    Index(
        "jobs_lease_expiry",
        "lock_until",
        postgresql_where=text(f"status IN {statuses_sql(LEASED)}"),
    ),
    # the deadline keeper's scan: unfinished jobs with a deadline, soonest first (0061)
    Index(
        "jobs_deadline",
        "deadline_at",
        postgresql_where=text(f"deadline_at IS NOT NULL AND status IN {statuses_sql(ACTIVE)}"),
    ),
    # the claim: a queue's waiting jobs in line order
    Index("jobs_claim", "queue", "sched_key", postgresql_where=text(_WAITING)),
    # CreateJob's fair share: the last place in line of a key at a priority
    Index(
        "jobs_fair_share",
        "queue",
        "fairness_key",
        "priority",
        "sched_key",
        postgresql_where=text(_WAITING),
        postgresql_include=["next_run_at"],
    ),
    # the claim's count of running jobs per concurrency key
    Index(
        "jobs_running_key",
        "concurrency_key",
        postgresql_where=text(f"status IN {statuses_sql(LEASED)} AND concurrency_key IS NOT NULL"),
    ),
    # ListJobs by target, a user's or anyone's (migration 0009)
    Index(
        "jobs_target",
        "target_type",
        "target_id",
        "user_id",
        "created_at",
        postgresql_where=text("target_type IS NOT NULL"),
    ),
    # a lineage's retries, oldest first (RetryJobs: retried since its walk began?)
    Index(
        "jobs_retry_lineage",
        "retry_root_id",
        "created_at",
        postgresql_where=text("retry_root_id IS NOT NULL"),
    ),
    # at most one live retry (waiting, running or succeeded) per original job
    Index(
        "jobs_one_live_retry",
        "retry_root_id",
        unique=True,
        postgresql_where=text(
            f"retry_root_id IS NOT NULL AND status NOT IN {statuses_sql(RERUNNABLE)}"
        ),
    ),
    # an admin RetryJob's idempotency key names one retry
    Index(
        "jobs_retry_key",
        "retry_key",
        unique=True,
        postgresql_where=text("retry_key IS NOT NULL"),
    ),
    # ListJobs' id_suffix: the id's hex digits reversed, so "ends with" is a prefix range
    # (migration 0022)
    Index("jobs_id_tail", text("(reverse(replace(id::text, '-', '')) COLLATE \"C\")")),
    # retention: a type's finished jobs, oldest first (migration 0009)
    Index(
        "jobs_finished",
        "job_type",
        "finished_at",
        postgresql_where=text(f"status IN {statuses_sql(TERMINAL)}"),
    ),
)

job_snapshots = Table(
    "job_snapshots",
    metadata,
    Column(
        "job_id", UUID(as_uuid=False), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("payload", JSONB, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("schema_version", String(100), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True)),
    # the definition's redaction_version when the snapshot was built (migration 0009)
    Column("redaction_version", String(32)),
    # the cleaner's scan
    Index("job_snapshots_expiry", "expires_at", postgresql_where=text("expires_at IS NOT NULL")),
)

job_artifacts = Table(
    "job_artifacts",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column(
        "job_id", UUID(as_uuid=False), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
    ),
    Column("artifact_type", String(64), nullable=False),
    Column("artifact_id", String(255), nullable=False),
    Column("ordinal", Integer, nullable=False, server_default="0"),
    Column("payload", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("job_id", "artifact_type", "artifact_id", name="job_artifacts_unique"),
)

# Checkpoints (migration 0014): the provider response each named step of a job recorded
# (RecordStep), reused by the job's later attempts. Protected like the output: deleted with
# the job, never logged.
job_steps = Table(
    "job_steps",
    metadata,
    Column(
        "job_id",
        UUID(as_uuid=False),
        ForeignKey("jobs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("step", String(64), primary_key=True),
    Column("attempt", Integer, nullable=False),
    Column("call_id", String(64), nullable=False),
    Column("response_text", Text, nullable=False),
    Column("response_parsed", JSONB),
    Column("provider", String(64), nullable=False),
    Column("model", String(255), nullable=False),
    Column("input_tokens", Integer, nullable=False, server_default="0"),
    Column("output_tokens", Integer, nullable=False, server_default="0"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Durable steps (migration 0060, issue 45): the outcome of each ``ctx.step`` a job's
# attempts completed, by its position in the job's code (ordinal), returned to its later
# attempts instead of running the step again. Sealed like the output, deleted with the job.
job_step_results = Table(
    "job_step_results",
    metadata,
    Column(
        "job_id",
        UUID(as_uuid=False),
        ForeignKey("jobs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("ordinal", Integer, primary_key=True),
    Column("name", String(64), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("result", Text),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

job_events = Table(
    "job_events",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column(
        "job_id", UUID(as_uuid=False), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
    ),
    Column("from_status", String(32)),
    Column("to_status", String(32), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("reason", String(100)),
    Column("worker_id", String(255)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # the lease token of the attempt this event ended (migration 0008): a late usage report
    # names its attempt by it; usage_unknown marks a reaped attempt whose provider calls
    # were not reported (ReportUsage clears it)
    Column("lease_token", UUID(as_uuid=False)),
    Column("usage_unknown", Boolean, nullable=False, server_default=text("false")),
    Index("job_events_job", "job_id", "id"),
)


# Signals sent to jobs (migration 0013), numbered per job in send order; they go with
# their job. An idempotency key is unique per job.
job_signals = Table(
    "job_signals",
    metadata,
    Column(
        "job_id", UUID(as_uuid=False), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("seq", Integer, primary_key=True),
    Column("name", String(64), nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("idempotency_key", String(255)),
    Column("sent_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index(
        "job_signals_idempotency",
        "job_id",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)
