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

# Every retry's original: the first job up its chain of retried_from_job_id (kept even
# when retention has deleted it, as a retry made from now on keeps it). Only retries are
# walked; a chain is a handful of links.
BACKFILL_LINEAGE = """
WITH RECURSIVE retries AS MATERIALIZED (
    SELECT id, retried_from_job_id AS source FROM jobs WHERE retried_from_job_id IS NOT NULL
), lineage(id, root, depth) AS (
    SELECT r.id, r.source, 1 FROM retries r
    WHERE NOT EXISTS (SELECT 1 FROM retries s WHERE s.id = r.source)
    UNION ALL
    SELECT r.id, l.root, l.depth + 1 FROM retries r JOIN lineage l ON r.source = l.id
    WHERE l.depth < 1000
)
UPDATE jobs j SET retry_root_id = l.root FROM lineage l WHERE l.id = j.id
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
