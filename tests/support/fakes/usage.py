"""A fake ``UsageStore``: usage reports' groups."""

from __future__ import annotations

from collections.abc import Sequence

from job_service.domain.usage import UsageGroup, UsageQuery


class FakeUsageStore:
    """``UsageStore`` answering the first ``limit`` of ``groups`` whatever the query;
    records each query with its limit."""

    def __init__(self, groups: Sequence[UsageGroup] = ()) -> None:
        self.groups = list(groups)
        self.asked: list[tuple[UsageQuery, int]] = []

    async def usage(self, query: UsageQuery, limit: int) -> list[UsageGroup]:
        self.asked.append((query, limit))
        return self.groups[:limit]
