"""The outbox: events written in the transaction of their change, published to NATS after."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Index,
    Integer,
    String,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from job_service.adapters.postgres.tables.base import metadata
from job_service.domain.outbox import OutboxStatus

outbox_events = Table(
    "outbox_events",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("event_type", String(64), nullable=False),
    Column("aggregate_type", String(64), nullable=False),
    Column("aggregate_id", String(255), nullable=False),
    # unique: the same logical event is stored once, and published with it as Nats-Msg-Id
    Column("dedupe_key", String(255), nullable=False, unique=True),
    Column("subject", String(255), nullable=False),
    # ids only: never user data or credentials
    Column("payload", JSONB, nullable=False),
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("attempt_count", Integer, nullable=False, server_default="0"),
    Column("available_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("locked_by", String(255)),
    Column("locked_at", DateTime(timezone=True)),
    Column("published_at", DateTime(timezone=True)),
    Column("last_error", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint(
        "status IN ({})".format(", ".join(f"'{s.value}'" for s in OutboxStatus)),
        name="outbox_status_known",
    ),
    Index(
        "outbox_pending",
        "available_at",
        "id",
        postgresql_where=text(f"status = '{OutboxStatus.PENDING.value}'"),
    ),
    Index(
        "outbox_processing",
        "locked_at",
        postgresql_where=text(f"status = '{OutboxStatus.PROCESSING.value}'"),
    ),
    Index(
        "outbox_published",
        "published_at",
        postgresql_where=text(f"status = '{OutboxStatus.PUBLISHED.value}'"),
    ),
    Index("outbox_dead", "id", postgresql_where=text(f"status = '{OutboxStatus.DEAD.value}'")),
)
