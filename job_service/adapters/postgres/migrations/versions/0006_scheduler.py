"""the scheduler: each waiting job's place in line (sched_key), its fairness and concurrency
keys, queue pause, fleet-wide rate-limit buckets and the definitions live workers run

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

WAITING = "status IN ('created', 'queued', 'retrying')"
LEASED_WITH_KEY = "status IN ('running', 'cancel_requested') AND concurrency_key IS NOT NULL"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("sched_key", sa.Float(precision=53)))
    op.add_column("jobs", sa.Column("fairness_key", sa.String(255)))
    op.add_column("jobs", sa.Column("concurrency_key", sa.String(255)))
    op.add_column("jobs", sa.Column("concurrency_limit", sa.Integer()))
    op.add_column("jobs", sa.Column("reserved_tokens", sa.Integer()))
    # Jobs waiting when the scheduler arrives keep their first-in first-out order.
    op.execute(
        f"UPDATE jobs SET fairness_key = user_id,"
        f" sched_key = extract(epoch FROM coalesce(next_run_at, queued_at, created_at))"
        f" WHERE {WAITING}"
    )
    # The claim: a queue's waiting jobs in line order.
    op.create_index("jobs_claim", "jobs", ["queue", "sched_key"], postgresql_where=sa.text(WAITING))
    # CreateJob's fair-share lookup: the last place in line of a key at a priority (due
    # jobs only: next_run_at is carried so delayed ones are passed over in the index).
    op.create_index(
        "jobs_fair_share",
        "jobs",
        ["queue", "fairness_key", "priority", "sched_key"],
        postgresql_where=sa.text(WAITING),
        postgresql_include=["next_run_at"],
    )
    # The claim's count of running jobs per concurrency key.
    op.create_index(
        "jobs_running_key", "jobs", ["concurrency_key"], postgresql_where=sa.text(LEASED_WITH_KEY)
    )
    op.create_table(
        "queue_controls",
        sa.Column("queue", sa.String(64), primary_key=True),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("paused_at", sa.DateTime(timezone=True)),
        sa.Column("paused_by", sa.String(255)),
    )
    # One token bucket per rate-limit key (a model tier), shared by every replica: the
    # configured rates come from the environment, the state lives here.
    op.create_table(
        "rate_limits",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("requests_available", sa.Float(precision=53), nullable=False),
        sa.Column("tokens_available", sa.Float(precision=53), nullable=False),
        sa.Column("factor", sa.Float(precision=53), nullable=False, server_default="1"),
        sa.Column(
            "refilled_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("blocked_until", sa.DateTime(timezone=True)),
        sa.Column("throttled_total", sa.BigInteger(), nullable=False, server_default="0"),
    )
    # What each live worker runs ("job_type@version"), refreshed by its LockJobs calls.
    op.create_table(
        "worker_definitions",
        sa.Column("worker_id", sa.String(255), primary_key=True),
        sa.Column("definitions", sa.ARRAY(sa.Text()), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("worker_definitions")
    op.drop_table("rate_limits")
    op.drop_table("queue_controls")
    op.drop_index("jobs_running_key", table_name="jobs")
    op.drop_index("jobs_fair_share", table_name="jobs")
    op.drop_index("jobs_claim", table_name="jobs")
    for column in ("reserved_tokens", "concurrency_limit", "concurrency_key"):
        op.drop_column("jobs", column)
    op.drop_column("jobs", "fairness_key")
    op.drop_column("jobs", "sched_key")
