"""call permits: per rate-limited model tier, the time of its next free call slot, which every
provider call takes from right before it is made (ADR 0002, "Rate limits at the call"),
beside the grant bucket in rate_limits, whose back-off factor and 429 block it shares

Expand-only, like every migration: a new table. An older replica, which does not know it,
keeps metering grants only.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "call_permits",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column(
            "next_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("call_permits")
