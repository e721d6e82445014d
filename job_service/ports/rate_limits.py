"""What the rate-limit use cases (token reservations, 429 feedback, the tiers' state) need."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from job_service.domain.rate_limits import BucketState


class RateLimitStore(Protocol):
    def spent_keys(self) -> list[str]: ...

    async def settle(self, used: Sequence[tuple[str, int]]) -> None:
        """Settles ended attempts' reservations: (job id, tokens really used)."""
        ...

    async def states(self) -> list[BucketState]: ...

    async def ensure_buckets(self) -> None:
        """A full bucket for each configured tier that has none yet."""
        ...


class CallPermitStore(Protocol):
    async def ensure(self, capacities: dict[str, float]) -> None:
        """A full call bucket for each of these tiers that has none yet."""
        ...

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
        """One permit: (granted, level before, factor, seconds still blocked); None: no
        bucket. LeaseLost unless the token holds the job's lease."""
        ...

    async def require_lease(self, job_id: str, lease_token: str) -> None: ...

    async def throttle(self, tier: str, retry_after_s: float, recovery_s: float) -> datetime | None:
        """Blocks the tier; until when (None: no bucket)."""
        ...
