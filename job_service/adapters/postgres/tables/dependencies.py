"""Dependencies between jobs (migration 0021): an edge per (job, job it waits for), marked
ended by the trigger of migration 0021 when the dependency ends (``DEPENDENCY_TRIGGER``),
and counted once by the dependency resolver."""

from __future__ import annotations

from sqlalchemy import Boolean, Column, DateTime, ForeignKey, Index, String, Table, false, text
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
    # The status the dependency ended with; NULL while it runs.
    Column("ended_status", String(32)),
    Column("ended_at", DateTime(timezone=True)),
    # The resolver has counted this ended edge for its job (exactly once).
    Column("counted", Boolean, nullable=False, server_default=false()),
    Index("job_dependencies_depends_on", "depends_on_id"),
    # the resolver's work: ended edges not yet counted
    Index(
        "job_dependencies_uncounted",
        "job_id",
        postgresql_where=text("ended_status IS NOT NULL AND NOT counted"),
    ),
)
