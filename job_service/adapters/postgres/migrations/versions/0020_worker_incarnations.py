"""worker incarnations: the process a worker session belongs to, so that a restarted
worker (a new process under the same worker id) ends its predecessor's leases at once and
an interrupted one (the same process back) ends none (ADR 0003)

Revision ID: 0020
Revises: 0018
Create Date: 2026-12-02 05:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: a session of an older worker, which names no process
    op.add_column("worker_sessions", sa.Column("incarnation", sa.String(255)))


def downgrade() -> None:
    op.drop_column("worker_sessions", "incarnation")
