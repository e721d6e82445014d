"""Web console sessions (migration 0024): opened at sign-in, checked on every page, closed
at sign-out or revoked; shared by every console replica through the job service."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Identity, Index, Integer, String, Table, text

from job_service.adapters.postgres.tables.base import metadata

console_sessions = Table(
    "console_sessions",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    # sha256 (hex) of the session's secret: the secret itself is never stored
    Column("secret_hash", String(64), nullable=False, unique=True),
    # the principal whose token opened it; only that principal can check or close it
    Column("principal", String(255), nullable=False),
    Column("opened_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("last_seen_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("idle_timeout_s", Integer, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("closed_at", DateTime(timezone=True)),
    # RevokeConsoleSessions: a principal's open sessions
    Index("console_sessions_principal", "principal", postgresql_where=text("closed_at IS NULL")),
    # the clean-up of long-ended sessions at each sign-in
    Index("console_sessions_expiry", "expires_at"),
)
