"""AI execution: prompt and model tier on jobs, usage rows per provider call, snapshot
expiry index

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 01:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("prompt_key", sa.String(length=100), nullable=True))
    op.add_column("jobs", sa.Column("prompt_version", sa.String(length=50), nullable=True))
    op.add_column("jobs", sa.Column("model_tier", sa.String(length=16), nullable=True))
    op.create_table(
        "usage_logs",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("job_id", postgresql.UUID(as_uuid=False), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("credential_mode", sa.String(length=16), nullable=False),
        sa.Column("input_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("output_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "cost_usd", sa.Numeric(precision=14, scale=6), server_default="0", nullable=False
        ),
        sa.Column("latency_ms", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error_code", sa.String(length=100), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("usage_logs_job", "usage_logs", ["job_id"], unique=False)
    op.create_index("usage_logs_created", "usage_logs", ["created_at"], unique=False)
    op.create_index(
        "job_snapshots_expiry",
        "job_snapshots",
        ["expires_at"],
        unique=False,
        postgresql_where=sa.text("expires_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("job_snapshots_expiry", table_name="job_snapshots")
    op.drop_index("usage_logs_created", table_name="usage_logs")
    op.drop_index("usage_logs_job", table_name="usage_logs")
    op.drop_table("usage_logs")
    op.drop_column("jobs", "model_tier")
    op.drop_column("jobs", "prompt_version")
    op.drop_column("jobs", "prompt_key")
