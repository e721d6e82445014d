"""Read-side queries for the API: job listings (keyset pages, newest first), the cheap
change check behind WatchJob, dead outbox events and their redrive, and the page token
secret. Writes of a job's status stay in ``repository.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from job_service.adapters.job_statements import JOB_COLUMNS
from job_service.adapters.repository import job_from_row
from job_service.domain.models import Cursor, DeadEvent, Job, JobFilter

# What WatchJob compares: any change of these is a change the watcher is told about.
FINGERPRINTS = """
SELECT id::text AS id, status, progress, attempt_count, updated_at FROM jobs
WHERE id = ANY($1::text[]::uuid[])
"""

DEAD_EVENTS = """
SELECT id, aggregate_id, subject, attempt_count, last_error, created_at FROM outbox_events
WHERE status = 'dead' AND ($1::bigint IS NULL OR id < $1)
ORDER BY id DESC LIMIT $2
"""

# Dead rows become pending again with a fresh attempt budget; the dispatcher takes them.
REDRIVE = """
UPDATE outbox_events SET status = 'pending', attempt_count = 0, available_at = now(),
    locked_by = NULL, locked_at = NULL
WHERE status = 'dead' AND ($1::bigint[] IS NULL OR id = ANY($1::bigint[]))
"""

PAGE_TOKEN_SECRET = "SELECT secret FROM api_secrets WHERE name = 'page_token'"

Fingerprint = tuple[str, float, int, Any]


class JobListing:
    """Listings and operator reads on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list_jobs(self, where: JobFilter, after: Cursor | None, limit: int) -> list[Job]:
        """Jobs matching ``where``, newest first (created_at, then id), strictly after
        ``after``; summaries without artifacts and timeline."""
        conditions: list[str] = []
        args: list[Any] = []

        def arg(value: Any) -> str:
            args.append(value)
            return f"${len(args)}"

        if where.user_id is not None:
            conditions.append(f"j.user_id = {arg(where.user_id)}")
        if where.job_type is not None:
            conditions.append(f"j.job_type = {arg(where.job_type)}")
        if where.status is not None:
            conditions.append(f"j.status = {arg(where.status.value)}")
        if where.queue is not None:
            conditions.append(f"j.queue = {arg(where.queue)}")
        if where.created_after is not None:
            conditions.append(f"j.created_at >= {arg(where.created_after)}")
        if where.created_before is not None:
            conditions.append(f"j.created_at < {arg(where.created_before)}")
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

    async def dead_events(self, before_id: int | None, limit: int) -> list[DeadEvent]:
        rows = await self._pool.fetch(DEAD_EVENTS, before_id, limit)
        return [
            DeadEvent(
                id=r["id"],
                job_id=r["aggregate_id"],
                subject=r["subject"],
                attempts=r["attempt_count"],
                last_error=r["last_error"],
                created_at=r["created_at"],
            )
            for r in rows
        ]

    async def redrive(self, event_ids: Sequence[int] | None) -> int:
        """Dead events (these, or all when None) made pending again; how many."""
        status = await self._pool.execute(REDRIVE, None if event_ids is None else list(event_ids))
        return int(status.rsplit(" ", 1)[-1])

    async def page_token_secret(self) -> bytes | None:
        secret = await self._pool.fetchval(PAGE_TOKEN_SECRET)
        return None if secret is None else str(secret).encode()
