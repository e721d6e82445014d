"""index published outbox rows for the pruner

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 01:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "outbox_published",
        "outbox_events",
        ["published_at"],
        unique=False,
        postgresql_where=sa.text("status = 'published'"),
    )


def downgrade() -> None:
    op.drop_index(
        "outbox_published",
        table_name="outbox_events",
        postgresql_where=sa.text("status = 'published'"),
    )
