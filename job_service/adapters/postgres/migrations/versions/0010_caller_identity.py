"""caller identity: the principal whose CreateJob created a job (its bearer token's
principal), shown to operators (AdminService answers, Job.created_by)

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): one new
nullable column; existing jobs keep NULL (created before callers were recorded).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-12 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("created_by", sa.String(255)))


def downgrade() -> None:
    op.drop_column("jobs", "created_by")
