"""worker sessions: which worker holds a session with which replica, so that any replica
can tell whether a worker that disconnected from another one came back

Revision ID: 0007
Revises: 0006
Create Date: 2027-01-10 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_sessions",
        # ordered per worker: a session with a higher id replaced the ones before it
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("worker_id", sa.String(255), nullable=False),
        sa.Column("instance_id", sa.String(255), nullable=False),
        sa.Column(
            "opened_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        sa.Column("goodbye", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index("worker_sessions_worker", "worker_sessions", ["worker_id", "id"])
    op.create_index("worker_sessions_closed", "worker_sessions", ["closed_at"])


def downgrade() -> None:
    op.drop_table("worker_sessions")
