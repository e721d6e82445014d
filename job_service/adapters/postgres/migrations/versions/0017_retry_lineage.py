"""retry lineage: every retry names the original job of its lineage (``retry_root_id``),
at most one live retry per original (a partial unique index), and an admin RetryJob's
idempotency key (``retry_key``, unique)

A retry of a retry belongs to the lineage of the first job (the original), so a lineage
has one root whatever was retried. "Live" is any status a retry cannot be made from
(waiting, running or succeeded): the index refuses a second one whoever creates it
(RetryJob, RetryJobs, two replicas at once). Existing retries are given their lineage
from ``retried_from_job_id``; where the old code had made parallel live retries of one
original, the oldest keeps the lineage and each other one becomes the original of its own
(nothing is lost: ``retried_from_job_id`` still says where it came from).

Expand-only: two nullable columns and three indexes. A replica of the previous release
retrying meanwhile writes a retry without a lineage (not held to the rule).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-20 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# The statuses a job can be retried from (domain.lifecycle.RERUNNABLE, spelled out: a
# migration does not import code that may change after it).
RERUNNABLE = "('failed', 'cancelled')"

BACKFILL_LINEAGE = """
WITH RECURSIVE lineage(id, root, depth) AS (
    SELECT id, id, 0 FROM jobs WHERE retried_from_job_id IS NULL
        OR NOT EXISTS (SELECT 1 FROM jobs o WHERE o.id = jobs.retried_from_job_id)
    UNION ALL
    SELECT j.id, l.root, l.depth + 1 FROM jobs j JOIN lineage l ON j.retried_from_job_id = l.id
    WHERE l.depth < 1000
)
UPDATE jobs j SET retry_root_id = l.root
FROM lineage l WHERE l.id = j.id AND l.depth > 0
"""

# Parallel live retries of one original (made before the rule): all but the oldest
# become originals of their own.
SPLIT_PARALLEL = f"""
UPDATE jobs j SET retry_root_id = j.id
FROM (
    SELECT id, row_number() OVER (PARTITION BY retry_root_id ORDER BY created_at, id) AS n
    FROM jobs WHERE retry_root_id IS NOT NULL AND status NOT IN {RERUNNABLE}
) live
WHERE live.id = j.id AND live.n > 1
"""


def upgrade() -> None:
    op.add_column("jobs", sa.Column("retry_root_id", sa.UUID(as_uuid=False), nullable=True))
    op.add_column("jobs", sa.Column("retry_key", sa.String(255), nullable=True))
    op.execute(BACKFILL_LINEAGE)
    op.execute(SPLIT_PARALLEL)
    op.create_index(
        "jobs_retry_lineage",
        "jobs",
        ["retry_root_id", "created_at"],
        postgresql_where=sa.text("retry_root_id IS NOT NULL"),
    )
    op.create_index(
        "jobs_one_live_retry",
        "jobs",
        ["retry_root_id"],
        unique=True,
        postgresql_where=sa.text(f"retry_root_id IS NOT NULL AND status NOT IN {RERUNNABLE}"),
    )
    op.create_index(
        "jobs_retry_key",
        "jobs",
        ["retry_key"],
        unique=True,
        postgresql_where=sa.text("retry_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("jobs_retry_key", table_name="jobs")
    op.drop_index("jobs_one_live_retry", table_name="jobs")
    op.drop_index("jobs_retry_lineage", table_name="jobs")
    op.drop_column("jobs", "retry_key")
    op.drop_column("jobs", "retry_root_id")
