"""job deadlines: ``jobs.deadline_at``, when an unfinished job ends FAILED with
DEADLINE_EXCEEDED whatever its retries, sleeps and waits (CreateJob's ``deadline``, or its
type's ``deadline_seconds``), and the partial index the deadline keeper scans (issue 45,
ADR 0013).

Expand-only: a nullable column (no rewrite) and an index over no row yet.

Revision ID: 0061
Revises: 0060
Create Date: 2026-12-07 01:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

# the unfinished statuses as of this revision (written out: a migration never changes)
_UNFINISHED = "('created', 'queued', 'running', 'retrying', 'cancel_requested')"
revision = "0061"
down_revision = "0060"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("deadline_at", sa.DateTime(timezone=True)))
    op.create_index(
        "jobs_deadline",
        "jobs",
        ["deadline_at"],
        postgresql_where=sa.text(f"deadline_at IS NOT NULL AND status IN {_UNFINISHED}"),
    )


def downgrade() -> None:
    op.drop_index("jobs_deadline", table_name="jobs")
    op.drop_column("jobs", "deadline_at")
