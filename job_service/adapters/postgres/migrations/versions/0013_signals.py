"""signals: messages to jobs (JobService.SendSignal), stored before they are delivered and
numbered per job in send order; jobs.signal_seq is the latest number

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): a new table
and a new column with a default (PostgreSQL 11+ adds it without a rewrite).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("signal_seq", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "job_signals",
        sa.Column(
            "job_id",
            UUID(as_uuid=False),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("payload", JSONB(), nullable=False),
        sa.Column("idempotency_key", sa.String(255)),
        sa.Column(
            "sent_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_index(
        "job_signals_idempotency",
        "job_signals",
        ["job_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_table("job_signals")
    op.drop_column("jobs", "signal_seq")
