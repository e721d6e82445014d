"""a dependency's end locks its row FOR UPDATE first (issue 43, "joins that attach in one
go")

Attaching a join locked each dependency's row FOR SHARE NOWAIT, which every heartbeat of a
running dependency conflicts with (an UPDATE takes FOR NO KEY UPDATE): a join over
thousands of running jobs retried until its tries ran out. It now locks them FOR KEY
SHARE NOWAIT, which no heartbeat, claim or other change short of the end conflicts with.

The exactly-once release needs the end to conflict with an attach in both orders (ADR
0008): an attach that committed first has its edge seen by the end's trigger (migration
0021), and one that comes after the end has committed sees the dependency ended. A plain
UPDATE of the status is a "no key" update, which FOR KEY SHARE lets through, and a KEY
SHARE lock taken after it committed, on the version the attach's snapshot saw, returns that
stale version (still running): its edge would wait forever. So before a job's status
becomes terminal, this trigger locks the row FOR UPDATE (a no-op where the statement's
transaction locked it so already, as SubmitResult and the reaper do): the end waits for
attaches holding the row, an attach during the end fails NOWAIT and tries again, and one
whose snapshot predates the end finds the row updated and reads its newest version.

No index and no column: the row versions a job writes and the entries its indexes take are
unchanged (a unique index over (id, status) would have made every status change a key
update, and every version of every row one index entry more).

Revision ID: 0045
Revises: 0055
Create Date: 2026-12-06 06:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0045"
down_revision = "0055"
branch_labels = None
depends_on = None

LOCK_ENDING_DEPENDENCY = """
CREATE OR REPLACE FUNCTION jobs_lock_ending_dependency() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- waits for attaches holding the row FOR KEY SHARE; marks it so that one coming later
    -- conflicts with the end instead of reading the version before it
    PERFORM 1 FROM jobs WHERE id = OLD.id FOR UPDATE;
    RETURN NEW;
END $$
"""

TERMINAL = "('succeeded', 'failed', 'cancelled')"
ENDING_TRIGGER = f"""
CREATE TRIGGER jobs_dependency_ending BEFORE UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.status IN {TERMINAL} AND OLD.status NOT IN {TERMINAL})
EXECUTE FUNCTION jobs_lock_ending_dependency()
"""


def upgrade() -> None:
    op.execute(LOCK_ENDING_DEPENDENCY)
    op.execute(ENDING_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS jobs_dependency_ending ON jobs")
    op.execute("DROP FUNCTION IF EXISTS jobs_lock_ending_dependency()")
