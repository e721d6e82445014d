"""Fleet-wide provider rate limits on PostgreSQL: one token bucket row per model tier,
shared by every job_service replica (and so by every worker, which is granted work only
through a claim).

A claim refills the tier's bucket for the time since its last refill (at the configured
rates times the back-off factor) and spends one request and the estimated tokens per job
it grants (``claims.py``'s RESERVE); the row lock serialises the tier's claims. A 429
reported by a worker (``call_permits.py``'s THROTTLE) halves the factor and blocks the tier
until the provider's Retry-After; the factor then recovers additively from the block's
end, in full JOBS_RATE_LIMIT_RECOVERY_S later. When a job ends, the tokens it reserved are
settled against what its provider calls really used.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from job_service.adapters.postgres.vocabulary import buckets
from job_service.domain.lifecycle import LOCKABLE, statuses_sql
from job_service.domain.rate_limits import BucketState, TierBudgets, recovered, refilled

ENSURE = """
INSERT INTO rate_limits (key, requests_available, tokens_available)
SELECT * FROM unnest($1::text[], $2::float8[], $3::float8[])
ON CONFLICT (key) DO NOTHING
"""

# What the ended attempts of these jobs ($1) really used ($2), per tier, against what their
# grants reserved; each job's reservation is cleared under its row lock, so it is settled
# once.
SETTLE_RESERVED = """
WITH used AS (
    SELECT u.id, u.used, j.model_tier, j.reserved_tokens
    FROM unnest($1::text[]::uuid[], $2::bigint[]) AS u(id, used)
    JOIN jobs j ON j.id = u.id
    WHERE j.reserved_tokens IS NOT NULL AND j.model_tier IS NOT NULL
    FOR UPDATE OF j
), cleared AS (
    UPDATE jobs j SET reserved_tokens = NULL FROM used WHERE j.id = used.id
), per_tier AS (
    SELECT model_tier AS key, sum(reserved_tokens - used) AS back, sum(used)::float8 AS used,
           count(*) AS attempts
    FROM used GROUP BY model_tier
)
UPDATE rate_limits r SET tokens_available = tokens_available + per_tier.back
FROM per_tier WHERE r.key = per_tier.key
RETURNING r.key, per_tier.used, per_tier.attempts
"""

STATES = f"""
SELECT r.key, r.requests_available, r.tokens_available, r.factor, r.blocked_until,
       r.throttled_total, {buckets.elapsed("r.refilled_at", "now()")} AS elapsed,
       (SELECT count(*) FROM jobs j WHERE j.model_tier = r.key
          AND j.status IN {statuses_sql(LOCKABLE)}
          AND (j.next_run_at IS NULL OR j.next_run_at <= now())) AS waiting
FROM rate_limits r WHERE r.key = ANY($1::text[]) ORDER BY r.key
"""


class RateLimitRepository:
    """The tiers' buckets, with this replica's memory of them (``budgets``: which tiers
    are spent, what an attempt of each uses), which a claim's reservation updates too."""

    def __init__(self, pool: asyncpg.Pool, budgets: TierBudgets) -> None:
        self._pool = pool
        self._budgets = budgets
        self._limits = budgets.limits

    async def ensure_buckets(self) -> None:
        """A full bucket for each configured tier that has none yet."""
        if not self._limits:
            return
        keys = sorted(self._limits)
        await self._pool.execute(
            ENSURE,
            keys,
            [self._limits[k].request_burst for k in keys],
            [self._limits[k].token_burst for k in keys],
        )

    def spent_keys(self) -> list[str]:
        """The tiers that had no budget at their last claim here and have not refilled."""
        return self._budgets.spent_keys()

    async def settle(self, used: Sequence[tuple[str, int]]) -> None:
        """Settles the reservations of ended attempts: (job id, tokens really used)."""
        if not self._limits or not used:
            return
        rows = await self._pool.fetch(
            SETTLE_RESERVED, [job_id for job_id, _ in used], [n for _, n in used]
        )
        for row in rows:
            self._budgets.settled(row["key"], row["used"], row["attempts"])

    async def states(self) -> list[BucketState]:
        rows = await self._pool.fetch(STATES, sorted(self._limits))
        states = []
        for row in rows:
            limit = self._limits[row["key"]]
            elapsed, factor = row["elapsed"], row["factor"]
            tokens = (
                refilled(
                    row["tokens_available"],
                    elapsed,
                    per_minute=limit.tokens_per_minute,
                    capacity=limit.token_burst,
                    factor=factor,
                )
                if limit.tokens_per_minute
                else 0.0
            )
            states.append(
                BucketState(
                    limit=limit,
                    requests_available=refilled(
                        row["requests_available"],
                        elapsed,
                        per_minute=limit.requests_per_minute,
                        capacity=limit.request_burst,
                        factor=factor,
                    ),
                    tokens_available=tokens,
                    factor=recovered(factor, elapsed, self._budgets.recovery_s),
                    blocked_until=row["blocked_until"],
                    throttled_total=row["throttled_total"],
                    waiting=row["waiting"],
                )
            )
        return states
