"""What usage reports need."""

from __future__ import annotations

from typing import Protocol

from job_service.domain.usage import UsageGroup, UsageQuery


class UsageStore(Protocol):
    async def usage(self, query: UsageQuery, limit: int) -> list[UsageGroup]:
        """Up to ``limit`` groups in key order (one ungrouped group without groupings;
        none when there is no usage), each call counted once whether its job is still
        stored or was folded into the daily aggregates."""
        ...
