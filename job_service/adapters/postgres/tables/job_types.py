"""The job types workers declared (migration 0040): one spec per (job_type, version)."""

from __future__ import annotations

from sqlalchemy import Column, DateTime, Index, PrimaryKeyConstraint, String, Table, func
from sqlalchemy.dialects.postgresql import JSONB

from job_service.adapters.postgres.tables.base import metadata

job_type_specs = Table(
    "job_type_specs",
    metadata,
    Column("job_type", String(64), nullable=False),
    Column("version", String(100), nullable=False),
    # the JobTypeSpec message as protobuf's JSON mapping (field names as in the proto)
    Column("spec", JSONB, nullable=False),
    Column("first_declared_by", String(255), nullable=False),
    Column(
        "first_declared_at",
        DateTime(timezone=True),
        nullable=False,
        server_default=func.clock_timestamp(),
    ),
    Column("last_declared_by", String(255), nullable=False),
    Column(
        "last_declared_at",
        DateTime(timezone=True),
        nullable=False,
        server_default=func.clock_timestamp(),
    ),
    PrimaryKeyConstraint("job_type", "version"),
    Index("job_type_specs_first_declared", "first_declared_at"),
)
