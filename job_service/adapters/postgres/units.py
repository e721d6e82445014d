"""Units of work that more than one PostgreSQL concern runs in its own transaction: create
a job on this connection (CreateJob's statement: a schedule's firing round runs it too),
attach a new job to its dependencies (retrying while a dependency's row is being ended:
CreateJob, a result's join, an operator's re-run), and cancel a job's unfinished
descendants (CancelJob, a bulk cancel's page).

The concern modules import this module beside the vocabulary, never each other (an
import-linter contract names it the star's second hub); it imports no concern module.
The vocabulary holds SQL text and row mapping; what runs statements across concerns is
here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias, TypeVar

import asyncpg

from job_service import metrics
from job_service.adapters.postgres.rows import job_from_row
from job_service.adapters.postgres.vocabulary.dependencies import ATTACH, CUSTOM_PLANS
from job_service.adapters.postgres.vocabulary.line import place_in_line
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
    user_keys,
)
from job_service.adapters.postgres.vocabulary.outbox_rows import handed, handed_messages
from job_service.adapters.postgres.vocabulary.quotas import counted, usage, within_quotas
from job_service.adapters.postgres.vocabulary.statuses import (
    CANCEL_STEP,
    cancelled_events,
    sql_status,
    timeline_event,
)
from job_service.domain.jobs import DataKeyChanged, NewJob
from job_service.domain.lifecycle import JobStatus
from job_service.domain.outbox import OutboxMessage
from job_service.domain.quotas import QuotaRefusal, Quotas
from job_service.ports.jobs import Stored
from shared.dependencies import DependencyPolicy
from shared.errors import ErrorCode, public_message

Connection: TypeAlias = "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"
T = TypeVar("T")

# What CreateJob binds: a new job's columns, its snapshot and the trace context.
_NEW_JOB = {**NEW_JOB_COLUMNS, **SNAPSHOT_FIELDS, "trace": "jsonb"}

# CreateJob's named parameters: each name's `$n::type` (bound in this order by `create_job`),
# then the three quota limits. Positional binding keeps asyncpg's binary encoding of each value.
_PARAM = {name: f"${n}::{sql_type}" for n, (name, sql_type) in enumerate(_NEW_JOB.items(), 1)}
_MAX_ACTIVE, _DAILY = f"${len(_PARAM) + 1}::int", f"${len(_PARAM) + 2}::int"
_BUDGET = f"${len(_PARAM) + 3}::numeric"
_OWNER = f"${len(_PARAM) + 4}::text"  # the replica whose dispatcher publishes the row, or NULL
_SEALED_UNDER = f"${len(_PARAM) + 5}::bytea"  # the data key it was sealed under, or NULL

# The new job, when its user is within the quotas (its 1st job in the request) and its
# payloads were sealed under the key the user's key row holds (or are not sealed).
_WITHIN_QUOTAS = f"""FROM keyed new, usage, key_held
    WHERE {within_quotas("usage", "1", _MAX_ACTIVE, _DAILY, _BUDGET)} AND key_held.current"""


# CreateJob: the new job, when its user is within the quotas (``vocabulary/quotas.py``) and
# its payloads were sealed under the key the user's key row holds (a primary-key probe in
# the same round trip: no read of the key before it), with its snapshot, first timeline
# event and dispatch row, and the day's counter bumped; the user's usage comes back whether
# or not the job was created (to name the limit hit), and whether the key was current.
def _create_job_sql(locked: bool) -> str:
    return f"""
WITH new AS (
    SELECT {", ".join(f"{param} AS {name}" for name, param in _PARAM.items())}
), usage AS (
    SELECT
        {usage(_PARAM["user_id"], _MAX_ACTIVE, _DAILY, _BUDGET)}
), key_held AS (
    SELECT {_SEALED_UNDER} IS NULL OR EXISTS (
        SELECT 1 FROM user_data_keys k
        WHERE k.user_id = {_PARAM["user_id"]} AND k.wrapped = {_SEALED_UNDER}
    ) AS current
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
                "sched_key": place_in_line("new", locked=locked),
                "trigger_type": "CASE WHEN new.schedule_id IS NULL THEN 'api' ELSE 'schedule' END",
            },
            _WITHIN_QUOTAS,
            snapshot=snapshot_row(
                "inserted.id::uuid", snapshot_values("new"), "FROM inserted, new"
            ),
            status="status",
            trace=_PARAM["trace"],
            owner=_OWNER,
            due="coalesce(src.next_run_at, now())",
        )
    }, counted AS (
    {counted("inserted", _DAILY)}
)
SELECT inserted.*, usage.active AS quota_active, usage.today AS quota_today,
       usage.spent AS quota_spent, key_held.current AS key_current, {handed("true", "dispatch")}
FROM usage CROSS JOIN key_held LEFT JOIN inserted ON true
"""


CREATE_JOB = _create_job_sql(locked=False)
# The same, for one job created alone in its transaction: its place read under its line's
# lock by the statement itself (``jobs_line_tail``): one round trip, no BEGIN, lock, COMMIT.
CREATE_JOB_LOCKED = _create_job_sql(locked=True)


async def create_job(
    conn: Connection, new: NewJob, quotas: Quotas, owner: str | None = None
) -> tuple[Stored, list[OutboxMessage]]:
    """Creates a job on ``conn`` (CreateJob's store and a schedule's firing round): in the
    caller's transaction when it holds one (a firing round creates its jobs in the
    transaction that advances it; its dispatch row is then left to a claim). With ``owner``
    (outside a transaction only: the row must have committed before it is published) a due
    job's dispatch row is written claimed by that replica's dispatcher, and returned to
    hand over to it. The existing job (False) when the idempotency key was used before,
    even at a quota limit; a QuotaRefusal (nothing stored) when the user is at a limit.

    Outside a transaction, the job takes its place in line under its line's lock, taken
    by its one statement (``CREATE_JOB_LOCKED``), committed before this returns. A firing
    round's jobs take none: a round creates many jobs in one transaction, whose line locks,
    taken in another order by another replica's round, could deadlock, and would hold the
    user's own creates until the round commits; a slot's job may at worst share a place
    with a create made at the same moment."""
    alone = not conn.is_in_transaction()
    return await _create_one(conn, new, quotas, owner, CREATE_JOB_LOCKED if alone else CREATE_JOB)


async def _create_one(
    conn: Connection, new: NewJob, quotas: Quotas, owner: str | None, statement: str
) -> tuple[Stored, list[OutboxMessage]]:
    row = await conn.fetchrow(
        statement,
        *new_job_record(new, _NEW_JOB).values(),
        quotas.max_active,
        quotas.daily,
        quotas.daily_cost_usd,
        owner,
        new.sealed_under,
    )
    assert row is not None, "the usage row is always there"
    if row["id"] is not None:
        return (job_from_row(row), True), handed_messages([row])
    if not row["key_current"]:
        raise DataKeyChanged(f"the data key job {new.id} was sealed under is not the user's")
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


# How often a transaction that attaches is tried while a dependency's row is busy being
# ended (the statement ending it commits in milliseconds; the next try counts it ended).
# Heartbeats and other changes of a dependency do not make it busy (vocabulary's ATTACH).
ATTACH_TRIES = 50
ATTACH_BACKOFF_S = 0.02


async def attach_retrying(pool: asyncpg.Pool, work: Callable[[Connection], Awaitable[T]]) -> T:
    """Runs ``work`` in a transaction of its own on a connection of ``pool``, again (from
    the start) while an attach in it finds a dependency's row locked by the statement
    ending it."""

    async def once() -> T:
        async with pool.acquire() as conn, conn.transaction():
            return await work(conn)

    return await _retrying(once, lambda attempt: ATTACH_BACKOFF_S * (1 + attempt % 5))


async def attach_retrying_on(conn: Connection, work: Callable[[], Awaitable[T]]) -> T:
    """``attach_retrying`` on the caller's connection (an operator's re-run, one job of a
    RetryJobs walk at a time): ``work`` in a transaction (a savepoint within the caller's)."""

    async def once() -> T:
        async with conn.transaction():
            return await work()

    return await _retrying(once, lambda attempt: ATTACH_BACKOFF_S)


async def _retrying(once: Callable[[], Awaitable[T]], backoff: Callable[[int], float]) -> T:
    for attempt in range(ATTACH_TRIES):
        try:
            return await once()
        except (asyncpg.LockNotAvailableError, asyncpg.DeadlockDetectedError):
            # (a deadlock: an attach that walks a row's newer versions waits, NOWAIT or not)
            metrics.dependency_attach_retried()
            if attempt == ATTACH_TRIES - 1:
                raise
            await asyncio.sleep(backoff(attempt))
    raise AssertionError("unreachable")


async def attach(
    conn: Connection,
    job_id: str,
    depends_on: Sequence[str],
    policy: DependencyPolicy,
    user_id: str,
) -> tuple[int, int]:
    """Attaches ``job_id``'s dependencies (in the caller's transaction, ``ATTACH``): how
    many were found (the user's jobs among ``depends_on``), and how many of them have not
    ended."""
    # Planned for these dependencies, not from a cached generic plan: a plan made while
    # `jobs` was small (the hot pool forces generic plans) joined a wide join's ids and
    # checked each edge's foreign key by scanning `jobs` — 12 s for 10,000 against 0.5 s.
    await conn.execute(CUSTOM_PLANS)
    row = await conn.fetchrow(ATTACH, job_id, list(depends_on), policy.value, user_id)
    assert row is not None
    return int(row["attached"]), int(row["pending"])


_CANCELLED = sql_status(JobStatus.CANCELLED)

# Cancels the unfinished descendants of the jobs $1 (an array): each moves as the
# lifecycle's CANCEL step says ($2: a JSON map from status to status), with its timeline
# and domain events.
CANCEL_DESCENDANTS = f"""
WITH RECURSIVE tree AS (
    SELECT id FROM jobs WHERE parent_job_id = ANY($1::uuid[])
    UNION
    SELECT c.id FROM jobs c JOIN tree ON c.parent_job_id = tree.id
), targets AS (
    SELECT j.id, j.status FROM jobs j JOIN tree ON tree.id = j.id
    WHERE $2::jsonb ? j.status
    ORDER BY j.id
    FOR UPDATE OF j
), changed AS (
    UPDATE jobs j SET status = $2::jsonb ->> t.status, cancel_requested_at = now(),
        updated_at = now(), next_run_at = NULL,
        finished_at = CASE WHEN $2::jsonb ->> t.status = {_CANCELLED} THEN now() END,
        error_code = CASE WHEN $2::jsonb ->> t.status = {_CANCELLED} THEN $3 END,
        public_error_message = CASE WHEN $2::jsonb ->> t.status = {_CANCELLED} THEN $4 END
    FROM targets t WHERE j.id = t.id
    RETURNING j.id, j.job_type, j.status, j.attempt_count, t.status AS from_status
), event AS (
    {timeline_event("changed", "from_status", "status", reason="'parent_cancelled'")}
), domain_event AS (
    {cancelled_events("changed")}
)
SELECT id::text AS id, status FROM changed
"""


async def cancel_descendants_of(
    conn: Connection, job_ids: list[str]
) -> list[tuple[str, JobStatus]]:
    """Cancels the jobs' unfinished descendants in the caller's transaction (CancelJob's,
    a bulk cancel's page); each one changed with its new status."""
    rows = await conn.fetch(
        CANCEL_DESCENDANTS,
        job_ids,
        CANCEL_STEP,
        ErrorCode.CANCELLED.value,
        public_message(ErrorCode.CANCELLED),
    )
    return [(r["id"], JobStatus(r["status"])) for r in rows]
