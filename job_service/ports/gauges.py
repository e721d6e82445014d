"""What the database-backed gauges (queue depth, outbox backlog) read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.outbox import OutboxStatus


class QueueDepth(Protocol):
    async def queue_depth(self, statuses: Sequence[str]) -> dict[tuple[str, str], int]: ...

    async def queue_readiness(self, queues: Sequence[str]) -> dict[str, tuple[bool, int]]:
        """Per queue: (paused, waiting jobs that are due)."""
        ...


class OutboxBacklog(Protocol):
    async def backlog(self) -> dict[OutboxStatus, tuple[int, float | None]]:
        """Per unpublished status: (rows, seconds the oldest due row has waited)."""
        ...
