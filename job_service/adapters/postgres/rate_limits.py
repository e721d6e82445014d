"""Fleet-wide provider rate limits on PostgreSQL: one token bucket row per model tier,
shared by every job_service replica (and so by every worker, which is granted work only
through a claim).

A claim refills the tier's bucket for the time since its last refill (at the configured
rates times the back-off factor) and spends one request and the estimated tokens per job
it grants; the row lock serialises the tier's claims. A 429 reported by a worker halves
the factor and blocks the tier until the provider's Retry-After; the factor then recovers
additively, in full after JOBS_RATE_LIMIT_RECOVERY_S. When a job ends, the tokens it
reserved are settled against what its provider calls really used.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import asyncpg

from job_service.domain.lifecycle import LOCKABLE, statuses_sql
from job_service.domain.scheduling import MIN_RATE_FACTOR, BucketState, RateLimit

# $1 key, $2 recovery seconds, $3 rpm, $4 tpm (0: none), $5/$6 bucket sizes, $7 the tokens
# each wanted job reserves, one element per job in line order.
RESERVE = """
WITH bucket AS (
    SELECT key, blocked_until, requests_available, tokens_available,
           greatest(extract(epoch FROM now() - refilled_at)::float8, 0) AS elapsed,
           factor
    FROM rate_limits WHERE key = $1
    FOR UPDATE
), level AS (
    SELECT key, blocked_until,
           least(1.0, factor + elapsed / $2) AS f,
           least($5, requests_available + elapsed * $3 / 60 * factor) AS req,
           CASE WHEN $4 > 0 THEN least($6, tokens_available + elapsed * $4 / 60 * factor)
                ELSE 'Infinity'::float8 END AS tok
    FROM bucket
), fits AS (
    SELECT count(e.ord) AS n, coalesce(max(e.spent), 0) AS tokens
    FROM level LEFT JOIN LATERAL (
        SELECT ord, sum(est) OVER (ORDER BY ord) AS spent
        FROM unnest($7::int[]) WITH ORDINALITY AS x(est, ord)
    ) e ON (level.blocked_until IS NULL OR level.blocked_until <= now())
       AND e.ord <= floor(level.req) AND e.spent <= level.tok
)
UPDATE rate_limits r SET
    requests_available = level.req - fits.n,
    tokens_available = CASE WHEN level.tok = 'Infinity' THEN 0 ELSE level.tok - fits.tokens END,
    factor = level.f, refilled_at = now()
FROM level, fits WHERE r.key = level.key
RETURNING fits.n AS granted, r.requests_available, level.tok - fits.tokens AS tokens_left,
          r.factor, r.blocked_until
"""

ENSURE = """
INSERT INTO rate_limits (key, requests_available, tokens_available)
SELECT * FROM unnest($1::text[], $2::float8[], $3::float8[])
ON CONFLICT (key) DO NOTHING
"""

# A 429 in an attempt of job $1: no grant of its tier before the provider's Retry-After,
# and half the rate from now on.
THROTTLED = """
UPDATE rate_limits SET
    factor = greatest($3::float8, least(1.0,
        factor + greatest(extract(epoch FROM now() - refilled_at)::float8, 0) / $4) / 2),
    requests_available = least(requests_available, 0), refilled_at = now(),
    blocked_until = greatest(coalesce(blocked_until, now()), now() + $2 * interval '1 second'),
    throttled_total = throttled_total + 1
WHERE key = (SELECT model_tier FROM jobs WHERE id = $1)
RETURNING key
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
       r.throttled_total, greatest(extract(epoch FROM now() - r.refilled_at)::float8, 0)
           AS elapsed,
       (SELECT count(*) FROM jobs j WHERE j.model_tier = r.key
          AND j.status IN {statuses_sql(LOCKABLE)}
          AND (j.next_run_at IS NULL OR j.next_run_at <= now())) AS waiting
FROM rate_limits r WHERE r.key = ANY($1::text[]) ORDER BY r.key
"""


# How much each settled batch moves a tier's average of tokens per attempt.
SMOOTHING = 0.2


class RateLimitRepository:
    """The tiers' buckets, with a per-replica memory of which tiers are spent (so that a
    claim's scan passes their jobs over instead of locking them for nothing)."""

    def __init__(self, pool: asyncpg.Pool, limits: Mapping[str, RateLimit], recovery_s: float):
        self._pool = pool
        self._limits = dict(limits)
        self._recovery_s = recovery_s
        self._spent_until: dict[str, float] = {}  # tier -> monotonic time budget returns
        # tier -> running average of the tokens an attempt really used (settled here)
        self._tokens_per_attempt: dict[str, float] = {}

    def limits(self, key: str) -> RateLimit | None:
        return self._limits.get(key)

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

    async def reserve(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        key: str,
        wanted: int,
        tokens_each: int,
    ) -> tuple[int, int]:
        """Spends the tier's budget on up to ``wanted`` grants; how many fit. Each grant
        reserves the tier's running average of tokens per attempt (``tokens_each``, the
        definitions' estimate, until attempts have been settled), so a wrong estimate
        does not leave the budget idle or overspent for long. Returns (grants that fit,
        tokens each one reserved)."""
        limit = self._limits[key]
        # what attempts of the tier really use, once known; the definitions' estimate before
        each = round(self._tokens_per_attempt.get(key, tokens_each))
        each = min(each, int(limit.token_burst)) if limit.tokens_per_minute else 0
        row = await conn.fetchrow(
            RESERVE,
            key,
            self._recovery_s,
            limit.requests_per_minute,
            limit.tokens_per_minute,
            limit.request_burst,
            limit.token_burst,
            [each] * wanted,
        )
        if row is None:  # no bucket (configured after start-up): grant nothing until it is
            await self.ensure_buckets()
            return 0, each
        granted = int(row["granted"])
        if granted < wanted:
            wait = limit.seconds_until(
                row["requests_available"], row["tokens_left"], each, row["factor"]
            )
            if row["blocked_until"] is not None:
                wait = max(wait, row["blocked_until"].timestamp() - time.time())
            self._spent_until[key] = time.monotonic() + max(wait, 0.01)
        else:
            self._spent_until.pop(key, None)
        return granted, each

    def spent_keys(self) -> list[str]:
        """The tiers that had no budget at their last claim here and have not refilled."""
        now = time.monotonic()
        return [key for key, until in self._spent_until.items() if until > now]

    def seconds_until_budget(self) -> float:
        """How long until the first spent tier has budget again (at least 10 ms)."""
        now = time.monotonic()
        waits = [until - now for until in self._spent_until.values() if until > now]
        return max(min(waits, default=0.0), 0.01)

    async def throttled(self, job_id: str, retry_after_s: float) -> None:
        """A provider call of this job's attempt got a 429 (Retry-After ``retry_after_s``):
        its tier, when rate-limited, backs off."""
        if not self._limits:
            return
        key = await self._pool.fetchval(
            THROTTLED, job_id, retry_after_s, MIN_RATE_FACTOR, self._recovery_s
        )
        if key is not None:
            self._spent_until[key] = time.monotonic() + retry_after_s

    async def settle(self, used: Sequence[tuple[str, int]]) -> None:
        """Settles the reservations of ended attempts: (job id, tokens really used)."""
        if not self._limits or not used:
            return
        rows = await self._pool.fetch(
            SETTLE_RESERVED, [job_id for job_id, _ in used], [n for _, n in used]
        )
        for row in rows:
            average = row["used"] / row["attempts"]
            known = self._tokens_per_attempt.get(row["key"])
            self._tokens_per_attempt[row["key"]] = (
                average if known is None else known + SMOOTHING * (average - known)
            )

    async def states(self) -> list[BucketState]:
        rows = await self._pool.fetch(STATES, sorted(self._limits))
        states = []
        for row in rows:
            limit = self._limits[row["key"]]
            factor = min(1.0, row["factor"] + row["elapsed"] / self._recovery_s)
            refill = row["elapsed"] / 60 * row["factor"]
            tokens = (
                min(limit.token_burst, row["tokens_available"] + refill * limit.tokens_per_minute)
                if limit.tokens_per_minute
                else 0.0
            )
            states.append(
                BucketState(
                    limit=limit,
                    requests_available=min(
                        limit.request_burst,
                        row["requests_available"] + refill * limit.requests_per_minute,
                    ),
                    tokens_available=tokens,
                    factor=factor,
                    blocked_until=row["blocked_until"],
                    throttled_total=row["throttled_total"],
                    waiting=row["waiting"],
                )
            )
        return states
