"""Retention on PostgreSQL (seed 003 §6): finished jobs deleted by type and age in bounded
batches (`FOR UPDATE SKIP LOCKED`, so any number of replicas share the work), their usage
folded into per-user, per-day, per-model aggregates first; past days' quota counters and
old aggregates pruned."""

from __future__ import annotations

import asyncpg

from job_service.domain.lifecycle import TERMINAL, statuses_sql
from job_service.domain.outbox import OutboxStatus

# One batch of one job type: the oldest finished jobs past the retention ($2 seconds), at
# most $3, skipping rows another replica holds. A parent waits for its children to go
# first, so a stored child never loses its parent (parent_job_id's ON DELETE SET NULL is a
# safety net, never the rule). Snapshots, artifacts and the timeline go by their foreign
# keys' CASCADE; usage rows are folded into usage_daily and deleted; dead outbox rows are
# deleted (published ones are the outbox pruner's, long before). Replicas deleting
# different jobs of the same users and day update the same usage_daily rows: they take
# those row locks in key order (ORDER BY), or two of them deadlock.
DELETE_FINISHED = f"""
WITH victims AS (
    SELECT j.id, j.user_id FROM jobs j
    WHERE j.job_type = $1 AND j.status IN {statuses_sql(TERMINAL)}
      AND j.finished_at < now() - $2 * interval '1 second'
      AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_job_id = j.id)
    ORDER BY j.finished_at
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
), usage AS (
    DELETE FROM usage_logs u USING victims v WHERE u.job_id = v.id
    RETURNING v.user_id, u.created_at, u.provider, u.model, u.input_tokens, u.output_tokens,
              u.cost_usd, u.error_code, u.reused
), billed AS (
    INSERT INTO usage_daily AS d (user_id, day, provider, model, calls, failed_calls,
                                  input_tokens, output_tokens, cost_usd)
    -- a reused step (usage_logs.reused) was no provider call: it is not billed as one
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
    -- the same sums again under the batch's job type ($1), for GetUsage by job type
    INSERT INTO usage_daily_job_types AS d (user_id, day, provider, model, job_type, calls,
                                            failed_calls, input_tokens, output_tokens, cost_usd)
    SELECT user_id, (created_at AT TIME ZONE 'UTC')::date, provider, model, $1,
           count(*) FILTER (WHERE NOT reused), count(*) FILTER (WHERE error_code IS NOT NULL),
           sum(input_tokens),
           sum(output_tokens), sum(cost_usd)
    FROM usage GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (user_id, day, provider, model, job_type) DO UPDATE SET
        calls = d.calls + excluded.calls,
        failed_calls = d.failed_calls + excluded.failed_calls,
        input_tokens = d.input_tokens + excluded.input_tokens,
        output_tokens = d.output_tokens + excluded.output_tokens,
        cost_usd = d.cost_usd + excluded.cost_usd
), outbox AS (
    DELETE FROM outbox_events o USING victims v
    WHERE o.status = '{OutboxStatus.DEAD.value}' AND o.aggregate_id = v.id::text
), deleted AS (
    DELETE FROM jobs j USING victims v WHERE j.id = v.id RETURNING j.id
)
SELECT count(*) FROM deleted
"""

# Quota counters only matter for today (UTC); yesterday's is kept for a create racing
# midnight.
PRUNE_QUOTA_COUNTERS = """
DELETE FROM job_quota_usage WHERE (user_id, day) IN (
    SELECT user_id, day FROM job_quota_usage
    WHERE day < (now() AT TIME ZONE 'UTC')::date - 1
    ORDER BY day LIMIT $1
    FOR UPDATE SKIP LOCKED
)
"""

# The per-job-type rows of the aggregates pruned go with them, in the same statement, so
# that the two tables never disagree about a day GetUsage reports.
PRUNE_USAGE_DAILY = """
WITH pruned AS (
    DELETE FROM usage_daily WHERE (user_id, day, provider, model) IN (
        SELECT user_id, day, provider, model FROM usage_daily
        WHERE day < ((now() - $1 * interval '1 second') AT TIME ZONE 'UTC')::date
        ORDER BY day LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    RETURNING user_id, day, provider, model
), by_type AS (
    DELETE FROM usage_daily_job_types t USING pruned p
    WHERE (t.user_id, t.day, t.provider, t.model) = (p.user_id, p.day, p.provider, p.model)
)
SELECT count(*) FROM pruned
"""


class RetentionRepository:
    """Deletes what has outlived its retention, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def delete_finished(self, job_type: str, retention_s: float, limit: int) -> int:
        return int(await self._pool.fetchval(DELETE_FINISHED, job_type, retention_s, limit))

    async def prune_quota_counters(self, limit: int) -> int:
        return _count(await self._pool.execute(PRUNE_QUOTA_COUNTERS, limit))

    async def prune_usage_daily(self, retention_s: float, limit: int) -> int:
        return int(await self._pool.fetchval(PRUNE_USAGE_DAILY, retention_s, limit))


def _count(status: str) -> int:
    return int(status.split()[-1])
