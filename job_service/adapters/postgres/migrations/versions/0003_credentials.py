"""credentials: users' sealed provider keys, and the key a job runs with

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 01:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "credentials",
        sa.Column("id", sa.UUID(as_uuid=False), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=200), server_default="", nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("nonce", sa.LargeBinary(), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "credentials_user_created", "credentials", ["user_id", "created_at"], unique=False
    )
    # A constant default: PostgreSQL adds the column without rewriting the table.
    op.add_column(
        "jobs",
        sa.Column(
            "credential_mode", sa.String(length=32), server_default="platform", nullable=False
        ),
    )
    op.add_column("jobs", sa.Column("credential_id", sa.UUID(as_uuid=False), nullable=True))
    # NOT VALID, then VALIDATE: the scan of existing rows runs without blocking writes.
    op.execute(
        "ALTER TABLE jobs ADD CONSTRAINT jobs_credential_consistent CHECK ("
        "credential_mode IN ('platform', 'user')"
        " AND (credential_mode = 'user') = (credential_id IS NOT NULL)) NOT VALID"
    )
    op.execute("ALTER TABLE jobs VALIDATE CONSTRAINT jobs_credential_consistent")


def downgrade() -> None:
    op.drop_constraint("jobs_credential_consistent", "jobs", type_="check")
    op.drop_column("jobs", "credential_id")
    op.drop_column("jobs", "credential_mode")
    op.drop_index("credentials_user_created", table_name="credentials")
    op.drop_table("credentials")
