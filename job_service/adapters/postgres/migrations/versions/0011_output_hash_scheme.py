"""output hash scheme: jobs.output_hash holds "jcs:sha256:<hex>" (RFC 8785 canonical
JSON, shared/output_hash.py) as well as the legacy bare 64-digit hex, so it widens to 80

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): a varchar
widened (PostgreSQL changes only the catalog; no rewrite), every stored hash still valid.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-12 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.alter_column("jobs", "output_hash", type_=sa.String(80), existing_type=sa.String(64))


def downgrade() -> None:
    # a jcs hash does not fit the old width: back to the legacy hash is not possible
    op.alter_column("jobs", "output_hash", type_=sa.String(64), existing_type=sa.String(80))
