"""What users consumed: the daily creation quota, one row per provider call, and the daily
sums that outlive their jobs."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Table,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import UUID

from job_service.adapters.postgres.tables.base import metadata

# The daily creation quota: jobs a user created per UTC day (migration 0005). A counter,
# because counting the day's jobs would cost one row visit per job at every create.
job_quota_usage = Table(
    "job_quota_usage",
    metadata,
    Column("user_id", String(255), primary_key=True),
    Column("day", Date, primary_key=True),
    Column("created", Integer, nullable=False),
    # the retention loop prunes past days (migration 0009)
    Index("job_quota_usage_day", "day"),
)


# One row per provider call, failed calls included; kept when its job is deleted.
usage_logs = Table(
    "usage_logs",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("job_id", UUID(as_uuid=False), ForeignKey("jobs.id", ondelete="SET NULL")),
    Column("attempt", Integer, nullable=False),
    Column("provider", String(64), nullable=False),
    Column("model", String(255), nullable=False),
    Column("credential_mode", String(16), nullable=False),
    Column("input_tokens", Integer, nullable=False, server_default="0"),
    Column("output_tokens", Integer, nullable=False, server_default="0"),
    Column("cost_usd", Numeric(14, 6), nullable=False, server_default="0"),
    Column("latency_ms", Integer, nullable=False, server_default="0"),
    Column("error_code", String(100)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # the worker's id of the call (migration 0008): a call reported twice is stored once
    Column("call_id", String(64)),
    # the attempt reused a recorded step's response (migration 0014): no call, no cost
    Column("reused", Boolean, nullable=False, server_default=text("false")),
    Index("usage_logs_job", "job_id"),
    Index("usage_logs_created", "created_at"),
    Index(
        "usage_logs_call_id",
        "call_id",
        unique=True,
        postgresql_where=text("call_id IS NOT NULL"),
    ),
)

# Usage that outlives its jobs (migration 0009): the retention loop folds the usage rows of
# the jobs it deletes into one row per user, UTC day, provider and model, so billing
# survives; pruned after JOBS_USAGE_RETENTION_S.
usage_daily = Table(
    "usage_daily",
    metadata,
    Column("user_id", String(255), primary_key=True),
    Column("day", Date, primary_key=True),
    Column("provider", String(64), primary_key=True),
    Column("model", String(255), primary_key=True),
    Column("calls", BigInteger, nullable=False, server_default="0"),
    Column("failed_calls", BigInteger, nullable=False, server_default="0"),
    Column("input_tokens", BigInteger, nullable=False, server_default="0"),
    Column("output_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cost_usd", Numeric(18, 6), nullable=False, server_default="0"),
    Index("usage_daily_day", "day"),
)

# usage_daily's rows again, split by the job type of the jobs folded (migration 0015),
# written by the same retention statement. What usage_daily holds beyond these rows (folded
# before 0015, or by an older replica) is reported under job type "".
usage_daily_job_types = Table(
    "usage_daily_job_types",
    metadata,
    Column("user_id", String(255), primary_key=True),
    Column("day", Date, primary_key=True),
    Column("provider", String(64), primary_key=True),
    Column("model", String(255), primary_key=True),
    Column("job_type", String(64), primary_key=True),
    Column("calls", BigInteger, nullable=False, server_default="0"),
    Column("failed_calls", BigInteger, nullable=False, server_default="0"),
    Column("input_tokens", BigInteger, nullable=False, server_default="0"),
    Column("output_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cost_usd", Numeric(18, 6), nullable=False, server_default="0"),
    Index("usage_daily_job_types_day", "day"),
)
