"""the API: listing and quota indexes, daily quota counters, dead-letter index, the page
token secret

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 01:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

ACTIVE = "status IN ('created', 'queued', 'running', 'retrying', 'cancel_requested')"


def upgrade() -> None:
    # ListJobs: a user's jobs, newest first.
    op.create_index("jobs_user_created_id", "jobs", ["user_id", "created_at", "id"])
    # The active-jobs quota counts only unfinished jobs.
    op.create_index("jobs_user_active", "jobs", ["user_id"], postgresql_where=sa.text(ACTIVE))
    # The daily quota: one counter per user and UTC day, bumped by CreateJob's statement.
    op.create_table(
        "job_quota_usage",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("created", sa.Integer(), nullable=False),
    )
    op.create_index(
        "outbox_dead", "outbox_events", ["id"], postgresql_where=sa.text("status = 'dead'")
    )
    op.create_table(
        "api_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    # Shared by every replica: page tokens signed by one are read by another.
    # gen_random_uuid() draws from the server's strong random source (2 x 122 bits).
    op.execute(
        "INSERT INTO api_secrets (name, secret) VALUES ('page_token',"
        " replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))"
    )


def downgrade() -> None:
    op.drop_table("api_secrets")
    op.drop_index("outbox_dead", table_name="outbox_events")
    op.drop_table("job_quota_usage")
    op.drop_index("jobs_user_active", table_name="jobs")
    op.drop_index("jobs_user_created_id", table_name="jobs")
