"""What the scheduler's use cases (claims, queue pause, rate limits, holds) need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.models import LockGrant, LockRefusal, QueueClaim
from job_service.domain.scheduling import BucketState, QueueState, WaitingFacts


class ClaimStore(Protocol):
    async def claim_queue(
        self, queue: str, want: int, worker_id: str, runnable: Sequence[str] | None
    ) -> QueueClaim:
        """Grants up to ``want`` of the queue's best eligible jobs."""
        ...

    async def claim_jobs(
        self, job_ids: Sequence[str], worker_id: str
    ) -> list[LockGrant | LockRefusal]:
        """Grants the named jobs that are eligible (distinct ids), answered per id."""
        ...


class QueueStore(Protocol):
    async def pause(self, queue: str, principal: str) -> None: ...

    async def resume(self, queue: str) -> bool: ...

    async def states(self, queues: Sequence[str]) -> list[QueueState]: ...

    async def waiting_facts(
        self, job_id: str, spent_tiers: Sequence[str]
    ) -> WaitingFacts | None: ...

    async def without_worker(self) -> int: ...


class RateLimitStore(Protocol):
    def spent_keys(self) -> list[str]: ...

    async def throttled(self, job_id: str, retry_after_s: float) -> None:
        """A 429 in an attempt of this job: its tier backs off."""
        ...

    async def settle(self, used: Sequence[tuple[str, int]]) -> None:
        """Settles ended attempts' reservations: (job id, tokens really used)."""
        ...

    async def states(self) -> list[BucketState]: ...
