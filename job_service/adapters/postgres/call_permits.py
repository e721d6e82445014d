"""Provider-call slots on PostgreSQL: per rate-limited model tier, the time its next call
slot is free (``call_permits.next_at``, a generic cell rate algorithm's theoretical arrival
time), shared by every replica; every provider call of a leased attempt takes a slot right
before it is made — now, or a reserved one a moment ahead that the worker confirms when it
is due — and a 429 blocks the tier, in both of its meters.

Slots are spaced 1 / (rate x back-off factor) apart, with a tolerance of (capacity - 1)
slots for bursts: in any window of W seconds at most capacity + rate x W slots. The row
lock serialises a tier's slots (one statement each, no transaction held across a round
trip).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from job_service.adapters.postgres.vocabulary import buckets
from job_service.domain.lifecycle import LEASED, status_values
from job_service.domain.rate_limits import MIN_RATE_FACTOR, CallSlot
from shared.errors import LeaseLost

ENSURE = """
INSERT INTO call_permits (key) SELECT unnest($1::text[]) ON CONFLICT (key) DO NOTHING
"""

# A slot of tier $3 for the attempt that holds job $1's lease $2 ($7 the leased statuses):
# the earliest time, not before a 429's block ends, that keeps the tier within $5 calls a
# second (times its back-off factor, $4 its recovery) with $6 of burst; taken only when it
# is at most $8 seconds ahead. FOR SHARE on the job waits for a concurrent end of the
# attempt: a worker whose lease just ended gets no slot.
TAKE = f"""
WITH job AS (
    SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2 AND status = ANY($7::text[])
    FOR SHARE
), locked AS (
    SELECT p.key, p.next_at
    FROM call_permits p WHERE p.key = $3 AND EXISTS (SELECT 1 FROM job)
    FOR UPDATE OF p
), bucket AS (
    -- the clock once the row lock is ours (now() is when the statement began: a statement
    -- that waited for the lock would hand out slots already past)
    SELECT key, clock_timestamp() AS t, greatest(next_at, clock_timestamp()) AS tat
    FROM locked
), tier AS (
    SELECT r.blocked_until,
           {buckets.recovered("r.factor", buckets.elapsed("r.refilled_at", "now()"), "$4")} AS f
    FROM rate_limits r WHERE r.key = $3
), slot AS (
    SELECT b.key, b.t, b.tat, 1.0 / ($5 * t.f) AS tau,
           greatest(b.t, coalesce(t.blocked_until, b.t),
                    b.tat - ($6 - 1) / ($5 * t.f) * interval '1 second') AS at
    FROM bucket b CROSS JOIN tier t
), answer AS (
    SELECT key, t, tat, tau, at, at <= t + $8 * interval '1 second' AS taken FROM slot
)
UPDATE call_permits p SET next_at = CASE WHEN answer.taken
    THEN greatest(answer.tat, answer.at) + answer.tau * interval '1 second' ELSE p.next_at END
FROM answer WHERE p.key = answer.key
RETURNING answer.taken, answer.at, extract(epoch FROM answer.at - answer.t)::float8 AS wait
"""

# A reserved slot ($4) of tier $3 is due: still good unless a 429 blocked the tier since.
CONFIRM = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2
               AND status = ANY($5::text[])) AS leased,
       extract(epoch FROM $4::timestamptz - now())::float8 AS early,
       coalesce(extract(epoch FROM r.blocked_until - now())::float8, 0) AS blocked_for
FROM rate_limits r WHERE r.key = $3
"""

LEASE_HELD = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2
               AND status = ANY($3::text[]))
"""

_RECOVERED = buckets.recovered("factor", buckets.elapsed("refilled_at", "now()"), "$4")

# A 429 from a call of tier $1, Retry-After $2 s: no slot and no grant of the tier before
# then (slots reserved inside the block are refused when confirmed). The first 429 of a
# block halves the rate (a block's later 429s are calls that were already under way); the
# rate recovers from the block's end, and the grant bucket does not refill before it.
THROTTLE = f"""
WITH tier AS (
    UPDATE rate_limits SET
        factor = CASE WHEN blocked_until IS NULL OR blocked_until <= now()
            THEN {buckets.backed_off(_RECOVERED, "$3::float8")}
            ELSE factor END,
        requests_available = least(requests_available, 0),
        blocked_until = greatest(blocked_until, now() + $2 * interval '1 second'),
        refilled_at = greatest(blocked_until, now() + $2 * interval '1 second'),
        throttled_total = throttled_total + 1
    WHERE key = $1
    RETURNING key, blocked_until
), calls AS (
    UPDATE call_permits p SET next_at = greatest(p.next_at, tier.blocked_until)
    FROM tier WHERE p.key = tier.key
)
SELECT blocked_until FROM tier
"""

_LEASED = status_values(LEASED)


class CallPermitRepository:
    """``call_permits`` (and the 429 block in ``rate_limits``) on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def ensure(self, keys: list[str]) -> None:
        """A slot row for each of these tiers that has none yet."""
        await self._pool.execute(ENSURE, sorted(keys))

    async def take(
        self,
        job_id: str,
        lease_token: str,
        tier: str,
        *,
        per_second: float,
        capacity: float,
        recovery_s: float,
        ahead_s: float,
    ) -> CallSlot | None:
        """The tier's next slot, taken when at most ``ahead_s`` ahead; None when the tier
        has no row yet. LeaseLost unless ``lease_token`` holds the job's lease."""
        row = await self._pool.fetchrow(
            TAKE, job_id, lease_token, tier, recovery_s, per_second, capacity, _LEASED, ahead_s
        )
        if row is not None:
            return CallSlot(taken=row["taken"], at=row["at"], wait_s=max(row["wait"], 0.0))
        await self.require_lease(job_id, lease_token)
        return None

    async def confirm(
        self, job_id: str, lease_token: str, tier: str, slot_at: datetime
    ) -> tuple[float, float]:
        """A reserved slot is due: (seconds it is still ahead, negative when past, seconds
        the tier stays blocked); LeaseLost unless ``lease_token`` holds the job's lease."""
        row = await self._pool.fetchrow(CONFIRM, job_id, lease_token, tier, slot_at, _LEASED)
        if row is None:  # no such tier: nothing blocks it
            await self.require_lease(job_id, lease_token)
            return 0.0, 0.0
        if not row["leased"]:
            raise LeaseLost("the lease is no longer held")
        return row["early"], max(row["blocked_for"], 0.0)

    async def require_lease(self, job_id: str, lease_token: str) -> None:
        """LeaseLost unless ``lease_token`` holds the job's lease."""
        if not await self._pool.fetchval(LEASE_HELD, job_id, lease_token, _LEASED):
            raise LeaseLost("the lease is no longer held")

    async def throttle(self, tier: str, retry_after_s: float, recovery_s: float) -> datetime | None:
        """Blocks ``tier`` for ``retry_after_s``; when it is blocked until (None: no
        row)."""
        blocked: datetime | None = await self._pool.fetchval(
            THROTTLE, tier, retry_after_s, MIN_RATE_FACTOR, recovery_s
        )
        return blocked
