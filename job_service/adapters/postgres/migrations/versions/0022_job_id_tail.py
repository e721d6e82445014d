"""job id tail: find a job by the end of its id (ListJobs' id_suffix; the short id the
console and jobctl show is an id's last 8 hex digits, its random tail)

An index on the id's hex digits reversed, in the C collation, so that "ends with" is a
range scan on a prefix. The id never changes, so the index costs each new job one entry and
no update of a job's row (its HOT updates stay HOT).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 12:45:00
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX jobs_id_tail ON jobs ((reverse(replace(id::text, '-', '')) COLLATE \"C\"))"
    )


def downgrade() -> None:
    op.drop_index("jobs_id_tail", table_name="jobs")
