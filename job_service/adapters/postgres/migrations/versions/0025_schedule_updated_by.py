"""schedule updated_by: the principal whose call last changed a schedule (created, updated,
paused or resumed it), so that an operator's action on a schedule is attributed as an
action on a job is (its timeline)

Expand-only: one nullable column (NULL: changed before it was recorded; its created_by
stands until the next change).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-03 13:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("schedules", sa.Column("updated_by", sa.String(255)))


def downgrade() -> None:
    op.drop_column("schedules", "updated_by")
