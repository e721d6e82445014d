"""What the queues use cases (pause and resume, their state, holds, gauges) need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.holds import WaitingFacts
from job_service.domain.queues import QueueState


class QueueStore(Protocol):
    async def pause(self, queue: str, principal: str) -> None: ...

    async def resume(self, queue: str) -> bool: ...

    async def states(self, queues: Sequence[str]) -> list[QueueState]: ...

    async def waiting_facts(
        self, job_id: str, spent_tiers: Sequence[str]
    ) -> WaitingFacts | None: ...

    async def without_worker(self) -> int: ...

    async def suspended(self) -> dict[str, int]:
        """Jobs not due whose code sleeps or waits for a signal, by their SUSPENDED_* code."""
        ...
