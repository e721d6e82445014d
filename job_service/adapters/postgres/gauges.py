"""The metrics that need the database: queue depth and the outbox backlog.

Read by a housekeeping loop every ``JOBS_METRICS_COLLECT_INTERVAL_S`` (never per request):
two grouped counts over the partial and status indexes. Every replica reports the same
figures (they describe the shared database): aggregate them with ``max``, not ``sum``.
"""

from __future__ import annotations

from collections.abc import Iterable

import asyncpg

from job_service import metrics
from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.domain.lifecycle import UNFINISHED, status_values
from job_service.domain.outbox import OutboxStatus

QUEUE_DEPTH = """
SELECT queue, status, count(*) AS n FROM jobs
WHERE status = ANY($1::text[])
GROUP BY queue, status
"""


class DatabaseGauges:
    """Refreshes the database-backed gauges; ``queues`` are reported even when empty."""

    def __init__(self, pool: asyncpg.Pool, queues: Iterable[str]) -> None:
        self._pool = pool
        self._outbox = OutboxRepository(pool)
        self._queues = sorted(set(queues))

    async def refresh(self) -> int:
        """One refresh; returns 0 (nothing "handled", for the housekeeping loop)."""
        statuses = status_values(UNFINISHED)
        depth = await self._pool.fetch(QUEUE_DEPTH, statuses)
        backlog = await self._outbox.backlog()
        counts = {(r["queue"], r["status"]): r["n"] for r in depth}
        for queue in sorted({*self._queues, *(q for q, _ in counts)}):
            for status in statuses:
                metrics.QUEUE_DEPTH.labels(queue, status).set(counts.get((queue, status), 0))
        for status, (rows, _) in backlog.items():
            metrics.OUTBOX_ROWS.labels(status.value).set(rows)
        ages = [
            age
            for status, (_, age) in backlog.items()
            if status is not OutboxStatus.DEAD and age is not None
        ]
        metrics.OUTBOX_OLDEST_DUE_AGE.set(max(ages, default=0.0))
        return 0
