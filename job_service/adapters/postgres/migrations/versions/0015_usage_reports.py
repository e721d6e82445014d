"""usage reports and budgets: the usage that outlives its jobs per job type too
(usage_daily_job_types, folded beside usage_daily by the retention loop), and the index the
daily cost budget reads a user's jobs finished today through

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): a new table,
new indexes. usage_daily keeps its key: an older replica still folds into it during a
rolling deploy, and GetUsage reports what usage_daily holds beyond the per-type rows under
job type "".

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-14 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # usage_daily's rows again, split by job type: user, UTC day, provider, model, job type
    op.create_table(
        "usage_daily_job_types",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("model", sa.String(255), primary_key=True),
        sa.Column("job_type", sa.String(64), primary_key=True),
        sa.Column("calls", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("failed_calls", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Numeric(18, 6), nullable=False, server_default="0"),
    )
    op.create_index("usage_daily_job_types_day", "usage_daily_job_types", ["day"])
    # the daily cost budget: a user's jobs that finished today (their unfinished ones are
    # on jobs_user_active already)
    op.create_index(
        "jobs_user_finished",
        "jobs",
        ["user_id", "finished_at"],
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("jobs_user_finished", table_name="jobs")
    op.drop_index("usage_daily_job_types_day", table_name="usage_daily_job_types")
    op.drop_table("usage_daily_job_types")
