"""jobs_line_tail: a line's last place, read under the line's lock, in one statement
(issue 42: CreateJob in one round trip)

A new job's place in line (``sched_key``) is one quantum after the last due waiting job
of its line (queue, fairness key, priority). Two creates of one line at once must not
read the same last place, so CreateJob took the line's advisory lock in a statement of
its own before its insert, whose snapshot then saw every place taken under the lock:
BEGIN, the lock, the insert, COMMIT — four round trips. This function takes the same lock
(the same key as ``LOCK_LINES``, so both kinds of creates serialise) and then reads the
last place in a query of its own: VOLATILE, so that query takes a snapshot after the lock
is held, and sees every place a create that held it committed. CreateJob's statement calls
it for its one job and runs alone in its own transaction, the lock held to its commit:
one round trip.

The statuses and the due test are those of ``vocabulary/line.py``'s ``place_in_line``
(waiting: created, queued, retrying); ``tests/unit/test_line_tail.py`` keeps them equal.

Revision ID: 0055
Revises: 0050
Create Date: 2026-12-06 07:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0055"
down_revision = "0050"
branch_labels = None
depends_on = None

WAITING = "('created', 'queued', 'retrying')"

LINE_TAIL = f"""
CREATE OR REPLACE FUNCTION jobs_line_tail(q text, k text, p int) RETURNS float8
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF k IS NULL THEN
        RETURN NULL;  -- a job without a fairness key joins no line
    END IF;
    PERFORM pg_advisory_xact_lock(
        hashtextextended('line' || chr(31) || q || chr(31) || k || chr(31) || p, 0));
    RETURN (SELECT max(w.sched_key) FROM jobs w
            WHERE w.queue = q AND w.fairness_key = k AND w.priority = p
              AND w.status IN {WAITING}
              AND (w.next_run_at IS NULL OR w.next_run_at <= now()));
END
$$
"""


def upgrade() -> None:
    op.execute(LINE_TAIL)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS jobs_line_tail(text, text, int)")
