"""Read-side queries for the API: job listings (keyset pages, newest first), the cheap
change check behind WatchJob, and the page token secret. (Dead outbox events are the
outbox adapter's.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from job_service.adapters.postgres.rows import ERROR_ATTEMPT, JOB_COLUMNS, job_from_row
from job_service.adapters.postgres.vocabulary.filters import bind, filter_conditions
from job_service.domain.counts import JobCounts
from job_service.domain.dependencies import UNTIL_DEPENDENCIES_END
from job_service.domain.jobs import Job
from job_service.domain.lifecycle import ACTIVE, LEASED, TERMINAL, JobStatus, statuses_sql
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

# CountJobs: created in [$1, $2) by status now; finished in it by terminal status (through
# jobs_finished, one range per job type $3); every unfinished job by status, and of those
# the created ones due later than now (delayed; a job waiting for its dependencies is not).
COUNT_JOBS = f"""
WITH window_ AS (SELECT $1::timestamptz AS since, coalesce($2::timestamptz, now()) AS until)
SELECT 'created' AS kind, j.status, count(*)::bigint AS n, NULL::timestamptz AS at
FROM jobs j, window_ w WHERE j.created_at >= w.since AND j.created_at < w.until
GROUP BY j.status
UNION ALL
SELECT 'finished', j.status, count(*), NULL
FROM jobs j, window_ w
WHERE j.job_type = ANY($3::text[]) AND j.status IN {statuses_sql(TERMINAL)}
  AND j.finished_at >= w.since AND j.finished_at < w.until
GROUP BY j.status
UNION ALL
SELECT 'unfinished', j.status, count(*), NULL FROM jobs j WHERE j.status IN {statuses_sql(ACTIVE)}
GROUP BY j.status
UNION ALL
SELECT 'delayed', 'created', count(*), NULL FROM jobs j
WHERE j.status = 'created' AND j.next_run_at > now() AND j.next_run_at < $4
UNION ALL
SELECT 'until', '', 0, w.until FROM window_ w
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

    async def count_jobs(
        self, since: datetime, until: datetime | None, job_types: Sequence[str]
    ) -> JobCounts:
        rows = await self._pool.fetch(
            COUNT_JOBS, since, until, list(job_types), UNTIL_DEPENDENCIES_END
        )
        by_kind: dict[str, dict[JobStatus, int]] = {"created": {}, "finished": {}, "unfinished": {}}
        delayed, end = 0, until
        for r in rows:
            if r["kind"] == "delayed":
                delayed = r["n"]
            elif r["kind"] == "until":
                end = r["at"]
            else:
                by_kind[r["kind"]][JobStatus(r["status"])] = r["n"]
        assert end is not None
        return JobCounts(since, end, delayed=delayed, **by_kind)

    async def page_token_secret(self) -> bytes | None:
        secret = await self._pool.fetchval(PAGE_TOKEN_SECRET)
        return None if secret is None else str(secret).encode()
