"""Bulk admin actions on PostgreSQL (CancelJobs, RetryJobs): the jobs a selection names,
oldest first a keyset page at a time, their count, and the set-based cancel of a page.

A page is ordered by (created_at, id) ascending and continues strictly after a cursor, so
a job created or finished between two calls never shifts the pages (as OFFSET would). A
filter's walk is pinned to the jobs created before its first call (``JobSelection.until``,
from the database's clock): a job created during the walk — a retry it made that failed
at once, say — never matches a later page.
A filter selection holds only jobs the action would change (its status set, and for
cancel a cancellable type); an id selection holds every job the ids name, so that the
ones the action refuses are answered (RetryJobs) or counted as skipped (CancelJobs).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from job_service.adapters.postgres.units import cancel_descendants_of
from job_service.adapters.postgres.vocabulary.filters import bind, filter_conditions
from job_service.adapters.postgres.vocabulary.statuses import (
    CANCEL_STEP,
    cancelled_events,
    sql_status,
    timeline_event,
)
from job_service.domain.lifecycle import JobStatus, status_values
from job_service.domain.selection import Actionable, Candidate, Cursor, JobSelection
from shared.errors import ErrorCode, public_message

_CANCELLED = sql_status(JobStatus.CANCELLED)

# The page of a cancel, locked and moved in one statement, as CancelJob moves one job
# (queued/retrying/created -> cancelled at once, running -> cancel_requested), each with
# its timeline event carrying ``reason`` and, when cancelled, its domain event. Every page
# job comes back, with its new status when it moved. {page} is the page's SELECT; its
# parameters come first, then (from $k) the step map, the uncancellable types, the error
# code, the public message and the timeline reason.
CANCEL_PAGE = f"""
WITH page AS ({{page}}), targets AS (
    SELECT j.id, j.status FROM jobs j JOIN page p ON p.id = j.id
    WHERE {{step}}::jsonb ? j.status AND j.job_type <> ALL({{uncancellable}}::text[])
    ORDER BY j.id
    FOR UPDATE OF j
), changed AS (
    UPDATE jobs j SET status = {{step}}::jsonb ->> t.status, cancel_requested_at = now(),
        updated_at = now(), next_run_at = NULL,
        finished_at = CASE WHEN {{step}}::jsonb ->> t.status = {_CANCELLED} THEN now() END,
        error_code = CASE WHEN {{step}}::jsonb ->> t.status = {_CANCELLED} THEN {{code}} END,
        public_error_message = CASE WHEN {{step}}::jsonb ->> t.status = {_CANCELLED}
                                    THEN {{message}} END
    FROM targets t WHERE j.id = t.id
    RETURNING j.id, j.job_type, j.status, j.attempt_count, t.status AS from_status
), event AS (
    {timeline_event("changed", "from_status", "status", reason="{reason}")}
), domain_event AS (
    {{domain_events}}
)
SELECT p.id::text AS id, p.created_at, p.job_type, coalesce(c.from_status, p.status) AS status,
       p.actionable, c.status AS new_status
FROM page p LEFT JOIN changed c ON c.id = p.id
ORDER BY p.created_at, p.id
"""

# The time a filter's walk is pinned at: a job created by a transaction that starts after
# it (every job the walk makes) has a later created_at.
NOW = "SELECT clock_timestamp()"

MISSING = """
SELECT DISTINCT x::text AS id FROM unnest($1::uuid[]) x
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE id = x) ORDER BY 1
"""


class BulkRepository:
    """Selections of jobs for bulk admin actions, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def count(self, selection: JobSelection, actionable: Actionable) -> int:
        """How many jobs of the selection the action would change now."""
        args: list[Any] = []
        where, actionable_sql = _selection_sql(selection, actionable, args)
        sql = f"SELECT count(*) FROM jobs j WHERE {' AND '.join([*where, actionable_sql])}"
        return int(await self._pool.fetchval(sql, *args))

    async def page(
        self,
        selection: JobSelection,
        actionable: Actionable,
        after: Cursor | None,
        limit: int,
    ) -> tuple[list[Candidate], bool]:
        """Up to ``limit`` jobs of the selection strictly after ``after``, oldest first;
        and whether more follow."""
        args: list[Any] = []
        sql = _page_sql(selection, actionable, after, limit + 1, args)
        rows = await self._pool.fetch(sql, *args)
        return [_candidate(r) for r in rows[:limit]], len(rows) > limit

    async def now(self) -> datetime:
        """The database's clock (the one every job's ``created_at`` is read from)."""
        now: datetime = await self._pool.fetchval(NOW)
        return now

    async def missing(self, job_ids: Sequence[str]) -> list[str]:
        """The ids of ``job_ids`` that name no job."""
        rows = await self._pool.fetch(MISSING, list(job_ids))
        return [r["id"] for r in rows]

    async def cancel_page(
        self,
        selection: JobSelection,
        actionable: Actionable,
        after: Cursor | None,
        limit: int,
        reason: str,
    ) -> tuple[list[tuple[Candidate, JobStatus | None]], list[tuple[str, JobStatus]], bool]:
        """Cancels the next page of the selection in one transaction, its jobs' unfinished
        descendants with them (as CancelJob does). Returns each page job with its new
        status (None: left as it was), each descendant that moved with its new status, and
        whether more jobs follow the page."""
        args: list[Any] = []
        page = _page_sql(selection, actionable, after, limit, args)
        sql = CANCEL_PAGE.format(
            page=page,
            step=bind(args, CANCEL_STEP),
            uncancellable=bind(args, sorted(actionable.excluded_types)),
            code=bind(args, ErrorCode.CANCELLED.value),
            message=bind(args, public_message(ErrorCode.CANCELLED)),
            reason=bind(args, reason),
            domain_events=cancelled_events("changed"),
        )
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(sql, *args)
            acted = [
                (_candidate(r), None if r["new_status"] is None else JobStatus(r["new_status"]))
                for r in rows
            ]
            # the page's descendants in the page's transaction, as CancelJob's (a unit of work)
            descendants = await cancel_descendants_of(conn, [c.id for c, _ in acted])
        more = False
        if len(acted) == limit:
            last = acted[-1][0]
            _, more = await self.page(selection, actionable, Cursor(last.created_at, last.id), 0)
        return acted, descendants, more


def _selection_sql(
    selection: JobSelection, actionable: Actionable, args: list[Any]
) -> tuple[list[str], str]:
    """The selection's own conditions on ``jobs j``, and the condition that the action
    would change the job."""
    changes = (
        f"(j.status = ANY({bind(args, status_values(actionable.statuses))}::text[])"
        f" AND j.job_type <> ALL({bind(args, sorted(actionable.excluded_types))}::text[]))"
    )
    if selection.job_ids:
        return [f"j.id = ANY({bind(args, list(selection.job_ids))}::uuid[])"], changes
    where = filter_conditions(selection.where, args)
    if selection.until is not None:
        where.append(f"j.created_at < {bind(args, selection.until)}")
    return where, changes


def _page_sql(
    selection: JobSelection,
    actionable: Actionable,
    after: Cursor | None,
    limit: int,
    args: list[Any],
) -> str:
    where, changes = _selection_sql(selection, actionable, args)
    if not selection.job_ids:  # a filter selects only what the action changes
        where.append(changes)
    if after is not None:
        where.append(
            f"(j.created_at, j.id) > ({bind(args, after.created_at)}, {bind(args, after.id)}::uuid)"
        )
    return (
        f"SELECT j.id, j.created_at, j.job_type, j.status, {changes} AS actionable"
        f" FROM jobs j WHERE {' AND '.join(where)}"
        f" ORDER BY j.created_at, j.id LIMIT {bind(args, limit)}"
    )


def _candidate(row: asyncpg.Record) -> Candidate:
    return Candidate(
        id=str(row["id"]),
        created_at=row["created_at"],
        job_type=row["job_type"],
        status=JobStatus(row["status"]),
        actionable=row["actionable"],
    )
