"""A fake ``RateLimitStore``: the token buckets' side of rate limits."""

from __future__ import annotations

from collections.abc import Sequence

from job_service.domain.rate_limits import BucketState


class FakeRateLimitStore:
    """``RateLimitStore`` answering ``spent`` tiers and ``buckets`` states; records each
    settle (its (job, tokens) pairs) and how often the buckets were ensured."""

    def __init__(self, spent: Sequence[str] = (), buckets: Sequence[BucketState] = ()) -> None:
        self.spent = list(spent)
        self.buckets = list(buckets)
        self.settled: list[list[tuple[str, int]]] = []
        self.ensured = 0

    def spent_keys(self) -> list[str]:
        return list(self.spent)

    async def settle(self, used: Sequence[tuple[str, int]]) -> None:
        self.settled.append(list(used))

    async def states(self) -> list[BucketState]:
        return list(self.buckets)

    async def ensure_buckets(self) -> None:
        self.ensured += 1
