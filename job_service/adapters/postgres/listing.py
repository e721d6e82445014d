"""Read-side queries for the API: job listings (keyset pages, newest first), the cheap
change check behind WatchJob, and the page token secret. (Dead outbox events are the
outbox adapter's.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from job_service.adapters.postgres.rows import ERROR_ATTEMPT, JOB_COLUMNS, job_from_row
from job_service.adapters.postgres.vocabulary.filters import bind, filter_conditions
from job_service.domain.jobs import Job
from job_service.domain.lifecycle import LEASED, statuses_sql
from job_service.domain.selection import Cursor, JobFilter
from job_service.domain.workers import LiveWorker

# What WatchJob compares: any change of these is a change the watcher is told about.
FINGERPRINTS = """
SELECT id::text AS id, status, progress, attempt_count, updated_at FROM jobs
WHERE id = ANY($1::text[]::uuid[])
"""

# The workers with an open session, each with what it runs and the jobs it holds a lease
# on (found through jobs_lease_expiry, which holds only leased jobs).
LIVE_WORKERS = f"""
SELECT s.worker_id, min(s.opened_at) AS connected_at,
       coalesce((SELECT d.definitions FROM worker_definitions d
                 WHERE d.worker_id = s.worker_id), '{{}}') AS definitions,
       (SELECT count(*) FROM jobs j
        WHERE j.status IN {statuses_sql(LEASED)} AND j.locked_by = s.worker_id)::int
           AS running_jobs
FROM worker_sessions s WHERE s.closed_at IS NULL
GROUP BY s.worker_id ORDER BY s.worker_id
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
            f"SELECT {JOB_COLUMNS}, {ERROR_ATTEMPT} FROM jobs j"
            + (" WHERE " + " AND ".join(conditions) if conditions else "")
            + f" ORDER BY j.created_at DESC, j.id DESC LIMIT {arg(limit)}"
        )
        return [job_from_row(row) for row in await self._pool.fetch(sql, *args)]

    async def fingerprints(self, job_ids: Sequence[str]) -> dict[str, Fingerprint]:
        rows = await self._pool.fetch(FINGERPRINTS, list(job_ids))
        return {
            r["id"]: (r["status"], r["progress"], r["attempt_count"], r["updated_at"]) for r in rows
        }

    async def live_workers(self) -> list[LiveWorker]:
        rows = await self._pool.fetch(LIVE_WORKERS)
        return [
            LiveWorker(
                worker_id=r["worker_id"],
                connected_at=r["connected_at"],
                definitions=tuple(r["definitions"]),
                running_jobs=r["running_jobs"],
            )
            for r in rows
        ]

    async def page_token_secret(self) -> bytes | None:
        secret = await self._pool.fetchval(PAGE_TOKEN_SECRET)
        return None if secret is None else str(secret).encode()
