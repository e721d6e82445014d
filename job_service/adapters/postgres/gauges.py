"""What the database-backed gauges read besides the outbox backlog (``outbox.py``): queue
depth, one grouped count over the status index, and each queue's readiness."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from job_service.adapters.postgres.vocabulary.statuses import WAITING

QUEUE_DEPTH = """
SELECT queue, status, count(*) AS n FROM jobs
WHERE status = ANY($1::text[])
GROUP BY queue, status
"""


# Per queue: paused, and its waiting jobs that are due (the claim's index, jobs_claim, holds
# only waiting jobs; next_run_at rides along in jobs_fair_share).
QUEUE_READINESS = f"""
SELECT q.queue, coalesce(c.paused, false) AS paused,
       (SELECT count(*) FROM jobs j WHERE j.queue = q.queue AND j.status IN {WAITING}
          AND (j.next_run_at IS NULL OR j.next_run_at <= now())) AS due
FROM unnest($1::text[]) AS q(queue)
LEFT JOIN queue_controls c ON c.queue = q.queue
"""


class GaugeRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def queue_depth(self, statuses: Sequence[str]) -> dict[tuple[str, str], int]:
        """Jobs per (queue, status) of these statuses; pairs with none are left out."""
        rows = await self._pool.fetch(QUEUE_DEPTH, list(statuses))
        return {(r["queue"], r["status"]): r["n"] for r in rows}

    async def queue_readiness(self, queues: Sequence[str]) -> dict[str, tuple[bool, int]]:
        """Per queue: (paused, waiting jobs that are due)."""
        rows = await self._pool.fetch(QUEUE_READINESS, list(queues))
        return {r["queue"]: (r["paused"], r["due"]) for r in rows}
