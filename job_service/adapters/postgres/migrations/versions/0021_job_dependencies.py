"""job dependencies (issue 30): a job may wait for other jobs to end. The edges, the count
of edges the resolver has not yet counted as ended on the dependent, and the trigger that
marks a dependency's edges ended in the transaction that ends it, whatever statement ends
it (ADR 0008).

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

# Runs once per job that reaches a terminal status: marks each of its edges ended, with
# its status, under the edge's row lock (an edge is only ever ended by its dependency's
# end). It locks no dependent: counting the ended edges and deciding what they mean is the
# dependency resolver's (every replica; it locks the dependents in id order, so two
# counts never deadlock, and completions of one wide join never wait for each other).
# Attaching locks the dependencies' rows FOR SHARE first, so an edge is either visible to
# this trigger or attached after the dependency's status committed, and then attached
# already ended.
COUNT_ENDED_DEPENDENCY = """
CREATE OR REPLACE FUNCTION jobs_mark_ended_dependency() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- EXECUTE: planned for each end, never from a plan cached while the table was small
    -- (a scan of every edge per completion)
    EXECUTE 'UPDATE job_dependencies SET ended_status = $1, ended_at = now()
             WHERE depends_on_id = $2 AND ended_status IS NULL'
        USING NEW.status, NEW.id;
    RETURN NULL;
END $$
"""

TERMINAL = "('succeeded', 'failed', 'cancelled')"
DEPENDENCY_TRIGGER = f"""
CREATE TRIGGER jobs_dependency_ended AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.status IN {TERMINAL} AND OLD.status NOT IN {TERMINAL})
EXECUTE FUNCTION jobs_mark_ended_dependency()
"""


def upgrade() -> None:
    op.add_column("jobs", sa.Column("dependencies_uncounted", sa.Integer))
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
        sa.Column("counted", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_index("job_dependencies_depends_on", "job_dependencies", ["depends_on_id"])
    op.create_index(
        "job_dependencies_uncounted",
        "job_dependencies",
        ["job_id"],
        postgresql_where=sa.text("ended_status IS NOT NULL AND NOT counted"),
    )
    op.execute(COUNT_ENDED_DEPENDENCY)
    op.execute(DEPENDENCY_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS jobs_dependency_ended ON jobs")
    op.execute("DROP FUNCTION IF EXISTS jobs_mark_ended_dependency()")
    op.drop_table("job_dependencies")
    op.drop_column("jobs", "dependency_policy")
    op.drop_column("jobs", "dependencies_uncounted")
