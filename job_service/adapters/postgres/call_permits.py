"""Provider-call permits on PostgreSQL: a call bucket per rate-limited model tier
(``call_permits``), shared by every replica, which every provider call of a leased attempt
spends from right before it is made; and the 429 block of a tier, applied to both its
buckets.

The call bucket refills at the tier's rate times the back-off factor the grant bucket
(``rate_limits``) keeps; its row lock serialises the tier's permits (a statement each, no
transaction held across a round trip).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from job_service.domain.lifecycle import LEASED, status_values
from job_service.domain.rate_limits import MIN_RATE_FACTOR
from shared.errors import LeaseLost

ENSURE = """
INSERT INTO call_permits (key, available)
SELECT * FROM unnest($1::text[], $2::float8[])
ON CONFLICT (key) DO NOTHING
"""

# One permit of tier $3 for the attempt that holds job $1's lease $2: the bucket refilled
# for the time since its last refill (never before a block's end: refilled_at is set
# there), spent by one when it holds a whole call and the tier is not blocked. FOR SHARE
# on the job waits for a concurrent end of the attempt: a worker whose lease just ended
# gets no permit.
PERMIT = """
WITH job AS (
    SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2 AND status = ANY($7::text[])
    FOR SHARE
), bucket AS (
    SELECT p.key, p.available,
           greatest(extract(epoch FROM now() - p.refilled_at)::float8, 0) AS elapsed
    FROM call_permits p WHERE p.key = $3 AND EXISTS (SELECT 1 FROM job)
    FOR UPDATE OF p
), tier AS (
    SELECT r.blocked_until,
           least(1.0, r.factor
                 + greatest(extract(epoch FROM now() - r.refilled_at)::float8, 0) / $4) AS f
    FROM rate_limits r WHERE r.key = $3
), level AS (
    SELECT b.key, t.blocked_until, t.f,
           least($6, b.available + b.elapsed * $5 * t.f) AS level,
           (t.blocked_until IS NULL OR t.blocked_until <= now()) AS open
    FROM bucket b CROSS JOIN tier t
), answer AS (
    SELECT key, blocked_until, f, level, open AND level >= 1 AS granted FROM level
)
UPDATE call_permits p SET
    available = answer.level - answer.granted::int,
    refilled_at = greatest(now(), p.refilled_at)
FROM answer WHERE p.key = answer.key
RETURNING answer.granted, answer.level, answer.f AS factor,
          extract(epoch FROM answer.blocked_until - now())::float8 AS blocked_for
"""

LEASE_HELD = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2
               AND status = ANY($3::text[]))
"""

# A 429 from a call of tier $1, Retry-After $2 s: no permit and no grant of the tier before
# then. The first 429 of a block halves the rate (a block's later 429s are calls that were
# already under way); the rate recovers from the block's end, and neither bucket refills
# before it.
THROTTLE = """
WITH tier AS (
    UPDATE rate_limits SET
        factor = CASE WHEN blocked_until IS NULL OR blocked_until <= now()
            THEN greatest($3::float8, least(1.0, factor
                 + greatest(extract(epoch FROM now() - refilled_at)::float8, 0) / $4) / 2)
            ELSE factor END,
        requests_available = least(requests_available, 0),
        blocked_until = greatest(blocked_until, now() + $2 * interval '1 second'),
        refilled_at = greatest(blocked_until, now() + $2 * interval '1 second'),
        throttled_total = throttled_total + 1
    WHERE key = $1
    RETURNING key, blocked_until
), calls AS (
    UPDATE call_permits p SET available = least(p.available, 0),
                              refilled_at = tier.blocked_until
    FROM tier WHERE p.key = tier.key
)
SELECT blocked_until FROM tier
"""

_LEASED = status_values(LEASED)


class CallPermitRepository:
    """``call_permits`` (and the 429 block in ``rate_limits``) on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def ensure(self, capacities: dict[str, float]) -> None:
        """A full call bucket for each of these tiers that has none yet."""
        keys = sorted(capacities)
        await self._pool.execute(ENSURE, keys, [capacities[k] for k in keys])

    async def take(
        self,
        job_id: str,
        lease_token: str,
        tier: str,
        *,
        per_second: float,
        capacity: float,
        recovery_s: float,
    ) -> tuple[bool, float, float, float] | None:
        """One permit: (granted, the bucket's level before, the rate factor, seconds the
        tier stays blocked, <= 0 when not); None when the tier has no bucket yet.
        LeaseLost unless ``lease_token`` holds the job's lease."""
        row = await self._pool.fetchrow(
            PERMIT, job_id, lease_token, tier, recovery_s, per_second, capacity, _LEASED
        )
        if row is not None:
            return row["granted"], row["level"], row["factor"], row["blocked_for"] or 0.0
        await self.require_lease(job_id, lease_token)
        return None

    async def require_lease(self, job_id: str, lease_token: str) -> None:
        """LeaseLost unless ``lease_token`` holds the job's lease."""
        if not await self._pool.fetchval(LEASE_HELD, job_id, lease_token, _LEASED):
            raise LeaseLost("the lease is no longer held")

    async def throttle(self, tier: str, retry_after_s: float, recovery_s: float) -> datetime | None:
        """Blocks ``tier`` for ``retry_after_s``; when it is blocked until (None: no
        bucket)."""
        blocked: datetime | None = await self._pool.fetchval(
            THROTTLE, tier, retry_after_s, MIN_RATE_FACTOR, recovery_s
        )
        return blocked
