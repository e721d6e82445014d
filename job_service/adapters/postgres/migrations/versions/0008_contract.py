"""the job contract (issue 14): usage as a fact — each usage row's call id (unique: a call
reported twice is stored once), the lease token of the attempt an event ended (so a late
usage report finds its attempt), and attempts whose usage is unknown (reaped leases)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("usage_logs", sa.Column("call_id", sa.String(64)))
    op.create_index(
        "usage_logs_call_id",
        "usage_logs",
        ["call_id"],
        unique=True,
        postgresql_where=sa.text("call_id IS NOT NULL"),
    )
    op.add_column("job_events", sa.Column("lease_token", UUID(as_uuid=False)))
    op.add_column(
        "job_events",
        sa.Column("usage_unknown", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_column("job_events", "usage_unknown")
    op.drop_column("job_events", "lease_token")
    op.drop_index("usage_logs_call_id", table_name="usage_logs")
    op.drop_column("usage_logs", "call_id")
