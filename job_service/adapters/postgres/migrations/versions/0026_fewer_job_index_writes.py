"""fewer job index writes: two of the entries every version of a ``jobs`` row writes
(issue 28, "Fewer writes per job")

No update of a ``jobs`` row is HOT (each changes ``status``, which indexes and index
predicates read), so every version of a row (the create's insert, the lock's update and the
result's) writes an entry into every index whose predicate it meets. Measured per job
(``python -m bench.growth --writes``; docs/benchmarks.md, round 6): 28 ``jobs`` index entries
of the 50 a job wrote. Two of those indexes gave nothing back for the entries they took:

- ``jobs_parent`` held every job, though only child jobs have a parent and every query of
  it asks for a parent (``parent_job_id = ...``, which a NULL never meets): now partial,
  child jobs only. 3 entries fewer per job that is no child.
- ``jobs_queue_status_created`` (queue, status, created_at) served the queue-depth gauge and
  the counts of a queue's waiting and running jobs; ``jobs_claim`` counts the waiting ones,
  ``jobs_lease_expiry`` the running ones, and the per-user quota index ``jobs_user_active``
  (unfinished jobs only, written anyway by the create and the lock) now carries queue and
  status as well, so the gauge reads it alone (index-only, unfinished jobs only, where the
  old index had it read every job ever kept). ListJobs by queue and status goes through
  ``jobs_status_created``. 3 entries fewer per job.

Only indexes change: no table or column (expand-only). An older release reading the new
schema keeps its plans on the remaining indexes.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-03 16:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

_ACTIVE = "status IN ('created', 'queued', 'running', 'retrying', 'cancel_requested')"


def upgrade() -> None:
    op.drop_index("jobs_parent", table_name="jobs")
    op.create_index(
        "jobs_parent", "jobs", ["parent_job_id"], postgresql_where="parent_job_id IS NOT NULL"
    )
    op.drop_index("jobs_user_active", table_name="jobs")
    op.create_index(
        "jobs_user_active", "jobs", ["user_id", "queue", "status"], postgresql_where=_ACTIVE
    )
    op.drop_index("jobs_queue_status_created", table_name="jobs")


def downgrade() -> None:
    op.create_index("jobs_queue_status_created", "jobs", ["queue", "status", "created_at"])
    op.drop_index("jobs_user_active", table_name="jobs")
    op.create_index("jobs_user_active", "jobs", ["user_id"], postgresql_where=_ACTIVE)
    op.drop_index("jobs_parent", table_name="jobs")
    op.create_index("jobs_parent", "jobs", ["parent_job_id"])
