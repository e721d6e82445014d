"""Cron schedules and what became of each of their slots."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from job_service.adapters.postgres.tables.base import metadata

# Cron schedules (migration 0012, ScheduleService): the job template each slot creates, and
# the next slot to fire (NULL: paused or ended). The firing loop of every replica claims due
# rows with FOR UPDATE SKIP LOCKED.
schedules = Table(
    "schedules",
    metadata,
    Column("id", UUID(as_uuid=False), primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("idempotency_key", String(255)),
    Column("request_hash", String(64), nullable=False),
    Column("cron", String(255), nullable=False),
    Column("time_zone", String(64), nullable=False),
    Column("job_type", String(100), nullable=False),
    Column("input", JSONB, nullable=False),
    Column("priority", Integer),
    Column("credential_mode", String(32), nullable=False),
    Column("credential_id", UUID(as_uuid=False)),
    Column("target_type", String(32)),
    Column("target_id", String(255)),
    Column("overlap_policy", String(16), nullable=False),
    Column("catch_up_window_s", Float(precision=53), nullable=False),
    Column("catch_up_mode", String(16), nullable=False),
    Column("start_at", DateTime(timezone=True)),
    Column("end_at", DateTime(timezone=True)),
    Column("paused", Boolean, nullable=False, server_default=text("false")),
    Column("next_fire_at", DateTime(timezone=True)),
    Column("last_job_id", UUID(as_uuid=False)),
    Column("created_by", String(255)),
    # the principal whose call last changed it (migration 0025; NULL: never since)
    Column("updated_by", String(255)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index(
        "schedules_idempotency_unique",
        "user_id",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
    Index("schedules_user_created_id", "user_id", "created_at", "id"),
    Index(
        "schedules_due",
        "next_fire_at",
        postgresql_where=text("NOT paused AND next_fire_at IS NOT NULL"),
    ),
)

# What became of each slot of a schedule (fired with its job, skipped, refused, triggered);
# the primary key is the second guard (after the job's idempotency key) against a slot
# firing twice.
schedule_runs = Table(
    "schedule_runs",
    metadata,
    Column(
        "schedule_id",
        UUID(as_uuid=False),
        ForeignKey("schedules.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("slot", DateTime(timezone=True), primary_key=True),
    Column("outcome", String(16), nullable=False),
    Column("job_id", UUID(as_uuid=False)),
    Column("detail", String(100)),
    Column("recorded_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("schedule_runs_recorded", "recorded_at"),
)
