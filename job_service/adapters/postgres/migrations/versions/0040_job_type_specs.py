"""job type specs: the job types workers declare, as data (issue 41)

The job service runs no job type code: a worker declares each type it runs as a
``JobTypeSpec`` (ExecutorService.DeclareJobType), stored here once per (job_type, version)
with who declared it first and last. A different spec for a stored pair is refused, so a
row never changes but for its ``last_declared_*`` columns. Every replica loads the table at
start and reads what is new since (``first_declared_at``).

Expand-only: a new table.

Revision ID: 0040
Revises: 0026
Create Date: 2026-12-06 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0040"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_type_specs",
        sa.Column("job_type", sa.String(64), nullable=False),
        sa.Column("version", sa.String(100), nullable=False),
        sa.Column("spec", postgresql.JSONB(), nullable=False),
        sa.Column("first_declared_by", sa.String(255), nullable=False),
        sa.Column(
            "first_declared_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.clock_timestamp(),
        ),
        sa.Column("last_declared_by", sa.String(255), nullable=False),
        sa.Column(
            "last_declared_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.clock_timestamp(),
        ),
        sa.PrimaryKeyConstraint("job_type", "version"),
    )
    op.create_index("job_type_specs_first_declared", "job_type_specs", ["first_declared_at"])


def downgrade() -> None:
    op.drop_index("job_type_specs_first_declared", table_name="job_type_specs")
    op.drop_table("job_type_specs")
