"""New jobs on PostgreSQL: CreateJob's statement (with quotas, snapshot, timeline event and
dispatch row, one statement; a schedule's firing round runs it too, handed ``create_job``
by app.py). A re-run of a finished job is ``reruns.py``'s. What a new job brings and the
rows it is stored with are the vocabulary's (``vocabulary/new_job.py``)."""

from __future__ import annotations

from dataclasses import replace

import asyncpg

from job_service.adapters.postgres.rows import job_from_row
from job_service.adapters.postgres.vocabulary.dependencies import (
    CUSTOM_PLANS,
    OWNED,
    attach,
    attach_retrying,
)
from job_service.adapters.postgres.vocabulary.line import (
    LOCK_LINES,
    lines_of,
    place_in_line,
)
from job_service.adapters.postgres.vocabulary.new_job import (
    FIND_BY_IDEMPOTENCY_KEY,
    KEY_COLUMNS,
    NEW_JOB_COLUMNS,
    SNAPSHOT_FIELDS,
    new_job_record,
    new_job_rows,
    queued_or_created,
    record_values,
    snapshot_row,
    snapshot_values,
    spent_today,
    user_keys,
)
from job_service.adapters.postgres.vocabulary.outbox_rows import handed, handed_messages
from job_service.domain.dependencies import SHOWN_EDGES
from job_service.domain.jobs import NewJob
from job_service.domain.lifecycle import ACTIVE, statuses_sql
from job_service.domain.outbox import OutboxMessage
from job_service.domain.quotas import QuotaRefusal, Quotas
from job_service.ports.jobs import Stored

# What CreateJob binds: a new job's columns, its snapshot and the trace context.
_NEW_JOB = {**NEW_JOB_COLUMNS, **SNAPSHOT_FIELDS, "trace": "jsonb"}


# CreateJob's named parameters: each name's `$n::type` (bound in this order by `create`),
# then the three quota limits. Positional binding keeps asyncpg's binary encoding of each value.
_PARAM = {name: f"${n}::{sql_type}" for n, (name, sql_type) in enumerate(_NEW_JOB.items(), 1)}
_MAX_ACTIVE, _DAILY = f"${len(_PARAM) + 1}::int", f"${len(_PARAM) + 2}::int"
_BUDGET = f"${len(_PARAM) + 3}::numeric"
_OWNER = f"${len(_PARAM) + 4}::text"  # the replica whose dispatcher publishes the row, or NULL

# The new job, when its user is within the quotas (0: no limit).
_WITHIN_QUOTAS = f"""FROM keyed new, usage
    WHERE ({_MAX_ACTIVE} = 0 OR usage.active < {_MAX_ACTIVE})
      AND ({_DAILY} = 0 OR usage.today < {_DAILY})
      AND ({_BUDGET} = 0 OR usage.spent < {_BUDGET})"""

# Quotas: the unfinished-jobs count stops at its limit (0 counts nothing), so it costs at
# most that many index entries; jobs created today (UTC) are a counter row per user and day
# (0 leaves the counter alone), bumped in the same statement; the day's cost (the daily
# budget, 0 reads nothing) is summed from the user's usage rows of today. The status list
# is spelled as the partial index jobs_user_active spells it.
CREATE_JOB = f"""
WITH new AS (
    SELECT {", ".join(f"{param} AS {name}" for name, param in _PARAM.items())}
), usage AS (
    SELECT
        (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE user_id = {_PARAM["user_id"]}
                               AND status IN {statuses_sql(ACTIVE)} LIMIT {_MAX_ACTIVE}) a)
            AS active,
        coalesce((SELECT created FROM job_quota_usage
                  WHERE {_DAILY} > 0 AND user_id = {_PARAM["user_id"]}
                    AND day = (now() AT TIME ZONE 'UTC')::date), 0) AS today,
        {spent_today(_PARAM["user_id"], _BUDGET)} AS spent
), keyed AS (
    SELECT {", ".join(f"new.{c}" for c in NEW_JOB_COLUMNS if c not in KEY_COLUMNS)},
           {user_keys("new")}
    FROM new
), {
    new_job_rows(
        {
            **record_values("new"),
            "status": queued_or_created("new"),
            "queued_at": "now()",
            "sched_key": place_in_line("new"),
            "trigger_type": "CASE WHEN new.schedule_id IS NULL THEN 'api' ELSE 'schedule' END",
        },
        _WITHIN_QUOTAS,
        snapshot=snapshot_row("inserted.id::uuid", snapshot_values("new"), "FROM inserted, new"),
        status="status",
        trace=_PARAM["trace"],
        owner=_OWNER,
        due="coalesce(src.next_run_at, now())",
    )
}, counted AS (
    INSERT INTO job_quota_usage AS q (user_id, day, created)
    SELECT inserted.user_id, (now() AT TIME ZONE 'UTC')::date, 1 FROM inserted
    WHERE {_DAILY} > 0
    ON CONFLICT (user_id, day) DO UPDATE SET created = q.created + 1
)
SELECT inserted.*, usage.active AS quota_active, usage.today AS quota_today,
       usage.spent AS quota_spent, {handed("true", "dispatch")}
FROM usage LEFT JOIN inserted ON true
"""


async def create_job(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    new: NewJob,
    quotas: Quotas,
    owner: str | None = None,
) -> tuple[Stored, list[OutboxMessage]]:
    """NewJobRepository.create on ``conn``: in the caller's transaction when it holds one
    (a schedule's firing round creates its jobs in the transaction that advances it; its
    dispatch row is then left to a claim). With ``owner`` (outside a transaction only: the
    row must have committed before it is published) a due job's dispatch row is written
    claimed by that replica's dispatcher, and returned to hand over to it.

    Outside a transaction, the job takes its place in line under its line's lock
    (``LOCK_LINES``), in a transaction of its own committed before this returns. A firing
    round's jobs take none: a round creates many jobs in one transaction, whose line locks,
    taken in another order by another replica's round, could deadlock, and would hold the
    user's own creates until the round commits; a slot's job may at worst share a place
    with a create made at the same moment."""
    if not conn.is_in_transaction():
        lines = lines_of([(new.queue, new.fairness_key, new.user_id, new.priority)])
        if lines[0]:
            async with conn.transaction():
                await conn.execute(LOCK_LINES, *lines)
                return await _create_job(conn, new, quotas, owner)
    return await _create_job(conn, new, quotas, owner)


async def _create_job(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    new: NewJob,
    quotas: Quotas,
    owner: str | None,
) -> tuple[Stored, list[OutboxMessage]]:
    row = await conn.fetchrow(
        CREATE_JOB,
        *new_job_record(new, _NEW_JOB).values(),
        quotas.max_active,
        quotas.daily,
        quotas.daily_cost_usd,
        owner,
    )
    assert row is not None, "the usage row is always there"
    if row["id"] is not None:
        return (job_from_row(row), True), handed_messages([row])
    refusal = QuotaRefusal(
        active=row["quota_active"], today=row["quota_today"], spent=row["quota_spent"]
    )
    if new.idempotency_key is None:
        return refusal, []
    # The key exists: ON CONFLICT waited for its writer to commit, so it is visible.
    existing = await conn.fetchrow(
        FIND_BY_IDEMPOTENCY_KEY, new.user_id, new.job_type, new.idempotency_key
    )
    if existing is None:
        return refusal, []  # not a conflict: the quota kept the row out
    return (job_from_row(existing), False), []


class NewJobRepository:
    """New jobs (CreateJob's) with their snapshots, timeline and outbox rows,
    on one asyncpg pool. ``owner``: the replica whose dispatcher publishes the due rows it
    writes (None: they wait for a claim)."""

    def __init__(self, pool: asyncpg.Pool, owner: str | None = None) -> None:
        self._pool = pool
        self._owner = owner

    async def create(self, new: NewJob, quotas: Quotas) -> tuple[Stored, list[OutboxMessage]]:
        """Stores the job, its snapshot, its first timeline event and its dispatch row
        (claimed for the owner's dispatcher when due: returned to hand over). Returns the
        existing job instead when the idempotency key was used before (even at a quota
        limit), and a QuotaRefusal (nothing stored) when the user is at a limit."""
        if new.dependencies:
            return await attach_retrying(
                self._pool, lambda conn: _create_dependent(conn, new, quotas, self._owner)
            )
        async with self._pool.acquire() as conn:
            return await create_job(conn, new, quotas, self._owner)

    async def owned(self, job_ids: list[str], user_id: str) -> set[str]:
        """Which of ``job_ids`` are jobs of ``user_id``."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(CUSTOM_PLANS)  # as the attach's (vocabulary/dependencies.py)
            rows = await conn.fetch(OWNED, job_ids, user_id)
        return {r["id"] for r in rows}


async def _create_dependent(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    new: NewJob,
    quotas: Quotas,
    owner: str | None,
) -> tuple[Stored, list[OutboxMessage]]:
    """A job that waits for its dependencies, created and attached to them in the caller's
    transaction (it is not due: it takes no place in line, and its dispatch row waits)."""
    stored, handed = await _create_job(conn, new, quotas, owner)
    if isinstance(stored, QuotaRefusal) or not stored[1]:
        return stored, handed
    job = stored[0]
    deps = new.dependencies
    attached, pending = await attach(conn, job.id, deps.job_ids, deps.policy, new.user_id)
    if attached != len(deps.job_ids):
        # a dependency was deleted (retention) since it was checked: nothing is written
        raise LookupError(f"{len(deps.job_ids) - attached} dependencies are gone")
    shown = replace(
        job,
        depends_on=list(deps.job_ids[:SHOWN_EDGES]),
        dependencies_total=attached,
        dependencies_pending=pending,
        dependency_policy=deps.policy.value,
    )
    return (shown, True), handed
