"""console sessions: the web console's sign-ins as rows every console replica checks, so
that signing out (or an admin revoking a principal's sessions) ends a session everywhere

Expand-only: a new table.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 13:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column(
            "opened_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")
        ),
        sa.Column(
            "last_seen_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.Column("idle_timeout_s", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
    )
    op.create_index(
        "console_sessions_principal",
        "console_sessions",
        ["principal"],
        postgresql_where=sa.text("closed_at IS NULL"),
    )
    op.create_index("console_sessions_expiry", "console_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_table("console_sessions")
