"""What the rate-limit use cases (token reservations, 429 feedback, the tiers' state) need."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from job_service.domain.rate_limits import BucketState, CallSlot


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
    async def ensure(self, keys: list[str]) -> None:
        """A slot row for each of these tiers that has none yet."""
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
        ahead_s: float,
    ) -> CallSlot | None:
        """The tier's next slot, taken when at most ``ahead_s`` ahead; None: no row.
        LeaseLost unless the token holds the job's lease."""
        ...

    async def confirm(
        self, job_id: str, lease_token: str, tier: str, slot_at: datetime
    ) -> tuple[float, float]:
        """A reserved slot is due: (seconds still ahead, seconds the tier stays blocked)."""
        ...

    async def require_lease(self, job_id: str, lease_token: str) -> None: ...

    async def throttle(self, tier: str, retry_after_s: float, recovery_s: float) -> datetime | None:
        """Blocks the tier; until when (None: no row)."""
        ...
