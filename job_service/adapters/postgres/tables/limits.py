"""What holds a claim back besides the job itself: queue pauses and rate-limit buckets."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    String,
    Table,
    func,
    text,
)

from job_service.adapters.postgres.tables.base import metadata

# Queue pause (AdminService.PauseQueue): a row per queue ever paused.
queue_controls = Table(
    "queue_controls",
    metadata,
    Column("queue", String(64), primary_key=True),
    Column("paused", Boolean, nullable=False, server_default=text("false")),
    Column("paused_at", DateTime(timezone=True)),
    Column("paused_by", String(255)),
)

# One token bucket per rate-limit key (a model tier), shared by every replica; the
# configured rates come from the environment (JOBS_RATE_LIMITS).
rate_limits = Table(
    "rate_limits",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("requests_available", Float(precision=53), nullable=False),
    Column("tokens_available", Float(precision=53), nullable=False),
    Column("factor", Float(precision=53), nullable=False, server_default="1"),
    Column("refilled_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("blocked_until", DateTime(timezone=True)),
    Column("throttled_total", BigInteger, nullable=False, server_default="0"),
)

# Per rate-limited model tier, when its next call slot is free (a generic cell rate
# algorithm's theoretical arrival time): every provider call takes a slot right before it
# is made; it shares rate_limits' back-off factor and 429 block.
call_permits = Table(
    "call_permits",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("next_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
