"""credential idempotency: PutCredential's idempotency key, unique per user, with the hash
of the request it stored (provider, label and the key's sha256), so that a retried call
answers the credential it stored and another request under the key is refused

Expand-only: two nullable columns and a partial unique index.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03 12:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("credentials", sa.Column("idempotency_key", sa.String(255)))
    op.add_column("credentials", sa.Column("request_hash", sa.String(64)))
    op.create_index(
        "credentials_idempotency_unique",
        "credentials",
        ["user_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("credentials_idempotency_unique", table_name="credentials")
    op.drop_column("credentials", "request_hash")
    op.drop_column("credentials", "idempotency_key")
