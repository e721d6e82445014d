"""schedules: cron schedules that create jobs (ScheduleService), the record of each slot
(schedule_runs), and on a job the schedule and slot it was created for

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): two new
tables, two new nullable columns on jobs.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-13 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", UUID(as_uuid=False), primary_key=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("idempotency_key", sa.String(255)),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("cron", sa.String(255), nullable=False),
        sa.Column("time_zone", sa.String(64), nullable=False),
        sa.Column("job_type", sa.String(100), nullable=False),
        sa.Column("input", JSONB, nullable=False),
        sa.Column("priority", sa.Integer()),
        sa.Column("credential_mode", sa.String(32), nullable=False),
        sa.Column("credential_id", UUID(as_uuid=False)),
        sa.Column("target_type", sa.String(32)),
        sa.Column("target_id", sa.String(255)),
        sa.Column("overlap_policy", sa.String(16), nullable=False),
        sa.Column("catch_up_window_s", sa.Float(precision=53), nullable=False),
        sa.Column("catch_up_mode", sa.String(16), nullable=False),
        sa.Column("start_at", sa.DateTime(timezone=True)),
        sa.Column("end_at", sa.DateTime(timezone=True)),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column("next_fire_at", sa.DateTime(timezone=True)),
        sa.Column("last_job_id", UUID(as_uuid=False)),
        sa.Column("created_by", sa.String(255)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_index(
        "schedules_idempotency_unique",
        "schedules",
        ["user_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.create_index("schedules_user_created_id", "schedules", ["user_id", "created_at", "id"])
    op.create_index(
        "schedules_due",
        "schedules",
        ["next_fire_at"],
        postgresql_where=sa.text("NOT paused AND next_fire_at IS NOT NULL"),
    )
    op.create_table(
        "schedule_runs",
        sa.Column(
            "schedule_id",
            UUID(as_uuid=False),
            sa.ForeignKey("schedules.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("slot", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("job_id", UUID(as_uuid=False)),
        sa.Column("detail", sa.String(100)),
        sa.Column(
            "recorded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_index("schedule_runs_recorded", "schedule_runs", ["recorded_at"])
    op.add_column("jobs", sa.Column("schedule_id", UUID(as_uuid=False)))
    op.add_column("jobs", sa.Column("scheduled_for", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("jobs", "scheduled_for")
    op.drop_column("jobs", "schedule_id")
    op.drop_table("schedule_runs")
    op.drop_table("schedules")
