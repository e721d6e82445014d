"""user data keys: one data key per user, wrapped by the key-encryption key (issue 44)

Payloads at rest (inputs, outputs, artifacts, step checkpoints, signal payloads) are
sealed under their user's data key (``job_service.domain.envelopes``); the key is stored
only wrapped, with the id of the KEK that wrapped it so that a rotation finds the keys left
to re-wrap (``rewrapped_at`` says when one was). EraseUserData deletes the row: every
ciphertext of the user, backups included, stops opening.

Expand-only: a new table; old rows of the payload columns stay plaintext JSON and are read
as they are (the backfill seals them in the background).

Revision ID: 0050
Revises: 0040
Create Date: 2026-12-06 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0050"
down_revision = "0040"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_data_keys",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("kek_id", sa.String(64), nullable=False),
        sa.Column("wrapped", sa.LargeBinary(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("rewrapped_at", sa.DateTime(timezone=True)),
    )
    # the rotation's scan: keys wrapped under a KEK other than the current one
    op.create_index("user_data_keys_kek", "user_data_keys", ["kek_id"])


def downgrade() -> None:
    op.drop_index("user_data_keys_kek", table_name="user_data_keys")
    op.drop_table("user_data_keys")
