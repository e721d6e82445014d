"""The live workers: what each runs, and its sessions with the replicas."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Identity,
    Index,
    String,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY

from job_service.adapters.postgres.tables.base import metadata

# What each live worker runs ("job_type@version"), refreshed by its LockJobs calls.
worker_definitions = Table(
    "worker_definitions",
    metadata,
    Column("worker_id", String(255), primary_key=True),
    Column("definitions", ARRAY(Text), nullable=False),
    Column("seen_at", DateTime(timezone=True), nullable=False),
)

# Worker sessions (migration 0007): a worker's live stream with a replica. A session that
# ended without a goodbye, with no later session of its worker, ends the worker's leases;
# unless it names its process (``incarnation``, migration 0020, NULL for older workers):
# then only a later session of another process under the same worker id ends them.
worker_sessions = Table(
    "worker_sessions",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("worker_id", String(255), nullable=False),
    Column("instance_id", String(255), nullable=False),
    Column("opened_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("closed_at", DateTime(timezone=True)),
    Column("goodbye", Boolean, nullable=False, server_default=text("false")),
    Column("incarnation", String(255)),
    Index("worker_sessions_worker", "worker_id", "id"),
    Index("worker_sessions_closed", "closed_at"),
)
