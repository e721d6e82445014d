"""step checkpoints: job_steps holds the provider responses a job's attempts recorded
(RecordStep), one row per (job, step); usage_logs.reused marks a call an attempt answered
from such a record instead of calling the provider (no tokens, no cost).

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): a new table
and a column with a default (PostgreSQL stores the default in the catalog; no rewrite).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_steps",
        # a recorded response is the job's data, like its artifacts: deleted with the job
        sa.Column(
            "job_id",
            UUID(as_uuid=False),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("step", sa.String(64), primary_key=True),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("call_id", sa.String(64), nullable=False),
        sa.Column("response_text", sa.Text, nullable=False),
        sa.Column("response_parsed", JSONB),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.add_column(
        "usage_logs",
        sa.Column("reused", sa.Boolean, nullable=False, server_default=sa.text("false")),
    )


def downgrade() -> None:
    op.drop_column("usage_logs", "reused")
    op.drop_table("job_steps")
