"""Read-side queries for the API: job listings (keyset pages, newest first), the cheap
change check behind WatchJob, and the page token secret. (Dead outbox events are the
outbox adapter's.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from job_service.adapters.postgres.rows import JOB_COLUMNS, job_from_row
from job_service.adapters.postgres.vocabulary.filters import bind, filter_conditions
from job_service.domain.jobs import Job
from job_service.domain.selection import Cursor, JobFilter

# What WatchJob compares: any change of these is a change the watcher is told about.
FINGERPRINTS = """
SELECT id::text AS id, status, progress, attempt_count, updated_at FROM jobs
WHERE id = ANY($1::text[]::uuid[])
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
