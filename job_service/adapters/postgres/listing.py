"""Read-side queries for the API: job listings (keyset pages, newest first), the cheap
change check behind WatchJob, and the page token secret. (Dead outbox events are the
outbox adapter's.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from job_service.adapters.postgres.rows import JOB_COLUMNS, job_from_row
from job_service.domain.jobs import Job
from job_service.domain.selection import Cursor, JobFilter

# What WatchJob compares: any change of these is a change the watcher is told about.
FINGERPRINTS = """
SELECT id::text AS id, status, progress, attempt_count, updated_at FROM jobs
WHERE id = ANY($1::text[]::uuid[])
"""

PAGE_TOKEN_SECRET = "SELECT secret FROM api_secrets WHERE name = 'page_token'"

Fingerprint = tuple[str, float, int, Any]


def bind(args: list[Any], value: Any) -> str:
    """``value`` appended to a query's arguments; its ``$n`` placeholder."""
    args.append(value)
    return f"${len(args)}"


def filter_conditions(where: JobFilter, args: list[Any]) -> list[str]:
    """The SQL conditions on ``jobs j`` that ``where`` sets, their values appended to
    ``args`` (so that ``$n`` numbers continue from what ``args`` already holds)."""
    conditions: list[str] = []

    def arg(value: Any) -> str:
        return bind(args, value)

    if where.user_id is not None:
        conditions.append(f"j.user_id = {arg(where.user_id)}")
    if where.job_type is not None:
        conditions.append(f"j.job_type = {arg(where.job_type)}")
    if where.status is not None:
        conditions.append(f"j.status = {arg(where.status.value)}")
    if where.queue is not None:
        conditions.append(f"j.queue = {arg(where.queue)}")
    if where.target_type is not None:
        conditions.append(f"j.target_type = {arg(where.target_type)}")
    if where.target_id is not None:
        conditions.append(f"j.target_id = {arg(where.target_id)}")
    if where.created_after is not None:
        conditions.append(f"j.created_at >= {arg(where.created_after)}")
    if where.created_before is not None:
        conditions.append(f"j.created_at < {arg(where.created_before)}")
    return conditions


class JobListing:
    """Listings and operator reads on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list_jobs(self, where: JobFilter, after: Cursor | None, limit: int) -> list[Job]:
        """Jobs matching ``where``, newest first (created_at, then id), strictly after
        ``after``; summaries without artifacts and timeline."""
        args: list[Any] = []
        conditions = filter_conditions(where, args)

        def arg(value: Any) -> str:
            return bind(args, value)

        if after is not None:
            conditions.append(
                f"(j.created_at, j.id) < ({arg(after.created_at)}, {arg(after.id)}::uuid)"
            )
        sql = (
            f"SELECT {JOB_COLUMNS} FROM jobs j"
            + (" WHERE " + " AND ".join(conditions) if conditions else "")
            + f" ORDER BY j.created_at DESC, j.id DESC LIMIT {arg(limit)}"
        )
        return [job_from_row(row) for row in await self._pool.fetch(sql, *args)]

    async def fingerprints(self, job_ids: Sequence[str]) -> dict[str, Fingerprint]:
        rows = await self._pool.fetch(FINGERPRINTS, list(job_ids))
        return {
            r["id"]: (r["status"], r["progress"], r["attempt_count"], r["updated_at"]) for r in rows
        }

    async def page_token_secret(self) -> bytes | None:
        secret = await self._pool.fetchval(PAGE_TOKEN_SECRET)
        return None if secret is None else str(secret).encode()
