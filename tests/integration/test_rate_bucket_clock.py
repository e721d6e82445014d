"""A tier's bucket refills by the clock at the moment a claim spends it, not by when the
claim's transaction began: a claim that waited (for a key's lock, a busy event loop, a
frozen replica) must not hand the next claim the credit of its wait again. Chaos saw four
grants of a 2-request bucket within 8 ms. Real PostgreSQL; the claim statements as the
claims use case runs them."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from job_service.adapters.postgres.claims import ClaimRepository
from job_service.domain.rate_limits import RateLimit

# 2 requests a second, a bucket of 2: half a second refills one request
LIMIT = RateLimit("cheap", requests_per_minute=120, burst_requests=2)
WAIT_S = 0.6


async def test_a_claim_that_began_earlier_does_not_give_its_wait_to_the_next(
    database_url: str,
) -> None:
    pool = await asyncpg.create_pool(database_url, min_size=2, max_size=2)
    try:
        await pool.execute(
            "INSERT INTO rate_limits (key, requests_available, tokens_available) VALUES ($1, 2, 0)",
            LIMIT.key,
        )
        claims = ClaimRepository(pool, lease_ttl_s=60)
        async with claims.transaction() as slow:  # BEGIN: its now() is fixed from here
            began = time.monotonic()
            # the time a claim spends before it reaches the bucket (a lock, a busy loop)
            await asyncio.sleep(WAIT_S)
            first = await slow.reserve(LIMIT, 60.0, [0, 0])
        assert first is not None and first.granted == 2  # the bucket was full
        async with claims.transaction() as next_claim:
            second = await next_claim.reserve(LIMIT, 60.0, [0])
        spent_s = time.monotonic() - began - WAIT_S
    finally:
        await pool.close()

    assert second is not None
    # from the first claim's spending to the second's, less than half a second passed: no
    # request was refilled in between
    assert spent_s < 0.5
    assert second.granted == 0
