"""durable steps: job_step_results holds the outcome of each durable step a job's attempts
completed (``ctx.step(name, fn)``: any side effect; ExecutorService.RecordStepResult), one
row per (job, ordinal), returned to the job's later attempts with their lease so that a
completed step is not run again (issue 45, ADR 0013). Outcomes are the job's data: sealed
at rest like its output, deleted with the job.

Migration numbers 0060-0064 are issue 45's. Expand-only: a new table.

Revision ID: 0060
Revises: 0045
Create Date: 2026-12-06 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision = "0060"
down_revision = "0045"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_step_results",
        sa.Column(
            "job_id",
            UUID(as_uuid=False),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("ordinal", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        # the JSON result (sealed), or NULL when the step raised a job error
        sa.Column("result", sa.Text),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("job_step_results")
