"""What the retention loop needs (seed 003 §6)."""

from __future__ import annotations

from typing import Protocol


class RetentionStore(Protocol):
    async def delete_finished(self, job_type: str, retention_s: float, limit: int) -> int:
        """Deletes up to ``limit`` jobs of ``job_type`` finished more than ``retention_s``
        ago (with everything they own), their usage folded into the daily aggregates;
        returns how many."""
        ...

    async def prune_quota_counters(self, limit: int) -> int: ...

    async def prune_usage_daily(self, retention_s: float, limit: int) -> int: ...
