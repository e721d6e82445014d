"""the data lifecycle: a job's target (what it is about) and the provider and model it ran
with; the redaction version a snapshot was built under; retention (finished jobs by type
and age, usage kept as daily aggregates per user and model, quota counters by day)

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): new nullable
columns, new indexes, a new table.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-10 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TERMINAL = "status IN ('succeeded', 'failed', 'cancelled')"


def upgrade() -> None:
    # seed 003 §2.1: targetType / targetId, the learning object a job is about
    op.add_column("jobs", sa.Column("target_type", sa.String(32)))
    op.add_column("jobs", sa.Column("target_id", sa.String(255)))
    # seed 003 §2.2: modelProvider / modelName, from the usage the worker reports
    op.add_column("jobs", sa.Column("model_provider", sa.String(64)))
    op.add_column("jobs", sa.Column("model_name", sa.String(255)))
    # "every job about this knowledge item": a product service asks per user, an operator
    # across users; both lead with the target (ids of targets are globally unique)
    op.create_index(
        "jobs_target",
        "jobs",
        ["target_type", "target_id", "user_id", "created_at"],
        postgresql_where=sa.text("target_type IS NOT NULL"),
    )
    # retention: a type's finished jobs, oldest first
    op.create_index(
        "jobs_finished",
        "jobs",
        ["job_type", "finished_at"],
        postgresql_where=sa.text(TERMINAL),
    )
    # seed 000 §8.4: the redaction rules a snapshot was built under
    op.add_column("job_snapshots", sa.Column("redaction_version", sa.String(32)))
    # usage that outlives its jobs: one row per user, UTC day, provider and model
    op.create_table(
        "usage_daily",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("model", sa.String(255), primary_key=True),
        sa.Column("calls", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("failed_calls", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Numeric(18, 6), nullable=False, server_default="0"),
    )
    op.create_index("usage_daily_day", "usage_daily", ["day"])
    # the quota pruner: counters of past days
    op.create_index("job_quota_usage_day", "job_quota_usage", ["day"])


def downgrade() -> None:
    op.drop_index("job_quota_usage_day", table_name="job_quota_usage")
    op.drop_index("usage_daily_day", table_name="usage_daily")
    op.drop_table("usage_daily")
    op.drop_column("job_snapshots", "redaction_version")
    op.drop_index("jobs_finished", table_name="jobs")
    op.drop_index("jobs_target", table_name="jobs")
    for column in ("model_name", "model_provider", "target_id", "target_type"):
        op.drop_column("jobs", column)
