"""Dependencies between jobs (migration 0021): an edge per (job, job it waits for), and the
jobs whose dependencies have decided their fate, for the dependency resolver. The trigger
that counts an ended dependency is the migration's (``DEPENDENCY_TRIGGER``)."""

from __future__ import annotations

from sqlalchemy import Column, DateTime, ForeignKey, Index, String, Table, func
from sqlalchemy.dialects.postgresql import UUID

from job_service.adapters.postgres.tables.base import metadata

job_dependencies = Table(
    "job_dependencies",
    metadata,
    Column(
        "job_id",
        UUID(as_uuid=False),
        ForeignKey("jobs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    # No foreign key: retention deleting a finished dependency keeps the dependent's record.
    Column("depends_on_id", UUID(as_uuid=False), primary_key=True),
    # The status the dependency ended with, counted once; NULL while it runs.
    Column("ended_status", String(32)),
    Column("ended_at", DateTime(timezone=True)),
    Index("job_dependencies_depends_on", "depends_on_id"),
)

# A job whose last dependency ended ("ready") or whose dependency ended failed or cancelled
# under a policy that ends it ("broken"): one row per job until the resolver acts on it.
dependency_releases = Table(
    "dependency_releases",
    metadata,
    Column(
        "job_id",
        UUID(as_uuid=False),
        ForeignKey("jobs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("reason", String(8), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
