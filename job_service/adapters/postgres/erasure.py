"""EraseUserData on PostgreSQL: a user's finished jobs deleted in bounded batches, each
batch one statement (snapshots, artifacts, steps, events, signals and dependency edges go
by their foreign keys' CASCADE; outbox rows naming the jobs are deleted; the jobs' per-call
usage rows are folded into the daily counters, as retention does, and deleted), then the
user's schedules (their runs by CASCADE) and stored provider keys."""

from __future__ import annotations

import asyncpg

from job_service.domain.lifecycle import TERMINAL, statuses_sql
from job_service.ports.erasure import UserData

_JOB_ROWS = """
    (SELECT count(*) FROM job_artifacts x WHERE x.job_id IN (SELECT id FROM {jobs})) AS artifacts,
    (SELECT count(*) FROM job_steps x WHERE x.job_id IN (SELECT id FROM {jobs})) AS steps,
    (SELECT count(*) FROM job_signals x WHERE x.job_id IN (SELECT id FROM {jobs})) AS signals,
    (SELECT count(*) FROM job_events x WHERE x.job_id IN (SELECT id FROM {jobs})) AS events
"""

COUNT_USER_DATA = f"""
WITH mine AS (SELECT id FROM jobs WHERE user_id = $1)
SELECT
    (SELECT count(*) FROM mine) AS jobs,
    {_JOB_ROWS.format(jobs="mine")},
    (SELECT count(*) FROM usage_logs u WHERE u.job_id IN (SELECT id FROM mine)) AS usage_records,
    (SELECT count(*) FROM schedules WHERE user_id = $1) AS schedules,
    (SELECT count(*) FROM credentials WHERE user_id = $1) AS credentials
"""

COUNT_UNFINISHED = f"""
SELECT count(*) FROM jobs WHERE user_id = $1 AND status NOT IN {statuses_sql(TERMINAL)}
"""

# One batch: up to $2 of the user's finished jobs (a job that has not ended is never
# deleted: its worker may still report). The rows the CASCADE takes are counted from the
# statement's snapshot, before it. Usage rows are folded into usage_daily and
# usage_daily_job_types (per-user, per-day counters without content, kept for billing)
# in key order, as retention does, so that concurrent folds never deadlock.
ERASE_JOBS = f"""
WITH victims AS (
    SELECT j.id, j.user_id, j.job_type FROM jobs j
    WHERE j.user_id = $1 AND j.status IN {statuses_sql(TERMINAL)}
    ORDER BY j.id
    LIMIT $2
    FOR UPDATE OF j
), usage AS (
    DELETE FROM usage_logs u USING victims v WHERE u.job_id = v.id
    RETURNING v.user_id, v.job_type, u.created_at, u.provider, u.model, u.input_tokens,
              u.output_tokens, u.cost_usd, u.error_code, u.reused
), billed AS (
    INSERT INTO usage_daily AS d (user_id, day, provider, model, calls, failed_calls,
                                  input_tokens, output_tokens, cost_usd)
    SELECT user_id, (created_at AT TIME ZONE 'UTC')::date, provider, model,
           count(*) FILTER (WHERE NOT reused), count(*) FILTER (WHERE error_code IS NOT NULL),
           sum(input_tokens), sum(output_tokens), sum(cost_usd)
    FROM usage GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (user_id, day, provider, model) DO UPDATE SET
        calls = d.calls + excluded.calls,
        failed_calls = d.failed_calls + excluded.failed_calls,
        input_tokens = d.input_tokens + excluded.input_tokens,
        output_tokens = d.output_tokens + excluded.output_tokens,
        cost_usd = d.cost_usd + excluded.cost_usd
), billed_by_type AS (
    INSERT INTO usage_daily_job_types AS d (user_id, day, provider, model, job_type, calls,
                                            failed_calls, input_tokens, output_tokens, cost_usd)
    SELECT user_id, (created_at AT TIME ZONE 'UTC')::date, provider, model, job_type,
           count(*) FILTER (WHERE NOT reused), count(*) FILTER (WHERE error_code IS NOT NULL),
           sum(input_tokens), sum(output_tokens), sum(cost_usd)
    FROM usage GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (user_id, day, provider, model, job_type) DO UPDATE SET
        calls = d.calls + excluded.calls,
        failed_calls = d.failed_calls + excluded.failed_calls,
        input_tokens = d.input_tokens + excluded.input_tokens,
        output_tokens = d.output_tokens + excluded.output_tokens,
        cost_usd = d.cost_usd + excluded.cost_usd
), outbox AS (
    DELETE FROM outbox_events o USING victims v WHERE o.aggregate_id = v.id::text
), deleted AS (
    DELETE FROM jobs j USING victims v WHERE j.id = v.id RETURNING j.id
)
SELECT
    (SELECT count(*) FROM deleted) AS jobs,
    {_JOB_ROWS.format(jobs="victims")},
    (SELECT count(*) FROM usage) AS usage_records
"""

ERASE_SCHEDULES = "DELETE FROM schedules WHERE user_id = $1"
ERASE_CREDENTIALS = "DELETE FROM credentials WHERE user_id = $1"


class ErasureRepository:
    """The ErasureStore on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def count(self, user_id: str) -> UserData:
        row = await self._pool.fetchrow(COUNT_USER_DATA, user_id)
        assert row is not None  # one row of counts, always
        return UserData(**dict(row))

    async def unfinished(self, user_id: str) -> int:
        return int(await self._pool.fetchval(COUNT_UNFINISHED, user_id))

    async def erase_jobs(self, user_id: str, limit: int) -> UserData:
        row = await self._pool.fetchrow(ERASE_JOBS, user_id, limit)
        assert row is not None
        return UserData(**dict(row))

    async def erase_rest(self, user_id: str) -> UserData:
        async with self._pool.acquire() as conn, conn.transaction():
            schedules = await conn.execute(ERASE_SCHEDULES, user_id)
            credentials = await conn.execute(ERASE_CREDENTIALS, user_id)
        return UserData(schedules=_count(schedules), credentials=_count(credentials))


def _count(status: str) -> int:
    return int(status.split()[-1])
