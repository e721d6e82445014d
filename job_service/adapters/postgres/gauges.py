"""What the database-backed gauges read besides the outbox backlog (``outbox.py``): queue
depth, one grouped count over the status index."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

QUEUE_DEPTH = """
SELECT queue, status, count(*) AS n FROM jobs
WHERE status = ANY($1::text[])
GROUP BY queue, status
"""


class GaugeRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def queue_depth(self, statuses: Sequence[str]) -> dict[tuple[str, str], int]:
        """Jobs per (queue, status) of these statuses; pairs with none are left out."""
        rows = await self._pool.fetch(QUEUE_DEPTH, list(statuses))
        return {(r["queue"], r["status"]): r["n"] for r in rows}
