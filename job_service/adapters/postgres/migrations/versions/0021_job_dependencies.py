"""job dependencies (issue 30): a job may wait for other jobs to end. The edges, the count
of unfinished dependencies on the dependent, the releases the resolver acts on, and the
trigger that counts a dependency as it ends, in the transaction that ends it, whatever
statement ends it (ADR 0008).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 09:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# Runs once per job that reaches a terminal status. Each edge is counted once (the edge
# row's ended_status is set under its row lock); the dependent's count drops by one under
# its row lock, so of two dependencies ending at once on two replicas exactly one takes it
# to 0 and writes the release. A failed or cancelled dependency of a dependent whose
# policy is not "run" writes a "broken" release, which wins over a "ready" one. A
# dependent that no longer waits (cancelled meanwhile) is counted but never released.
# Attaching edges locks the dependencies' rows FOR SHARE first, so an edge is either
# visible to this trigger or attached after the dependency's status committed, and then
# counted as ended by the attach itself.
COUNT_ENDED_DEPENDENCY = """
CREATE OR REPLACE FUNCTION jobs_count_ended_dependency() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH ended AS (
        UPDATE job_dependencies e SET ended_status = NEW.status, ended_at = now()
        WHERE e.depends_on_id = NEW.id AND e.ended_status IS NULL
        RETURNING e.job_id
    ), counted AS (
        UPDATE jobs j SET dependencies_pending = j.dependencies_pending - 1
        FROM ended WHERE j.id = ended.job_id
        RETURNING j.id, j.status, j.dependencies_pending, j.dependency_policy
    )
    INSERT INTO dependency_releases AS r (job_id, reason)
    SELECT id, CASE WHEN NEW.status <> 'succeeded' AND dependency_policy <> 'run'
                    THEN 'broken' ELSE 'ready' END
    FROM counted
    WHERE status = 'created' AND (dependencies_pending = 0
          OR (NEW.status <> 'succeeded' AND dependency_policy <> 'run'))
    ON CONFLICT (job_id) DO UPDATE SET reason = 'broken' WHERE excluded.reason = 'broken';
    RETURN NULL;
END $$
"""

TERMINAL = "('succeeded', 'failed', 'cancelled')"
DEPENDENCY_TRIGGER = f"""
CREATE TRIGGER jobs_dependency_ended AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.status IN {TERMINAL} AND OLD.status NOT IN {TERMINAL})
EXECUTE FUNCTION jobs_count_ended_dependency()
"""


def upgrade() -> None:
    op.add_column("jobs", sa.Column("dependencies_pending", sa.Integer))
    op.add_column("jobs", sa.Column("dependency_policy", sa.String(8)))
    op.create_table(
        "job_dependencies",
        sa.Column(
            "job_id",
            UUID(as_uuid=False),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("depends_on_id", UUID(as_uuid=False), primary_key=True),
        sa.Column("ended_status", sa.String(32)),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
    )
    op.create_index("job_dependencies_depends_on", "job_dependencies", ["depends_on_id"])
    op.create_table(
        "dependency_releases",
        sa.Column(
            "job_id",
            UUID(as_uuid=False),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("reason", sa.String(8), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.execute(COUNT_ENDED_DEPENDENCY)
    op.execute(DEPENDENCY_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS jobs_dependency_ended ON jobs")
    op.execute("DROP FUNCTION IF EXISTS jobs_count_ended_dependency()")
    op.drop_table("dependency_releases")
    op.drop_table("job_dependencies")
    op.drop_column("jobs", "dependency_policy")
    op.drop_column("jobs", "dependencies_pending")
