"""What the rate-limit use cases (token reservations, 429 feedback, the tiers' state) need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.rate_limits import BucketState


class RateLimitStore(Protocol):
    def spent_keys(self) -> list[str]: ...

    async def throttled(self, job_id: str, retry_after_s: float) -> None:
        """A 429 in an attempt of this job: its tier backs off."""
        ...

    async def settle(self, used: Sequence[tuple[str, int]]) -> None:
        """Settles ended attempts' reservations: (job id, tokens really used)."""
        ...

    async def states(self) -> list[BucketState]: ...

    async def ensure_buckets(self) -> None:
        """A full bucket for each configured tier that has none yet."""
        ...
