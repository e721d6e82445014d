"""The metrics that need the database: queue depth and the outbox backlog.

Read by a housekeeping loop every ``JOBS_METRICS_COLLECT_INTERVAL_S`` (never per request):
two grouped counts over the partial and status indexes. Every replica reports the same
figures (they describe the shared database): aggregate them with ``max``, not ``sum``.
"""

from __future__ import annotations

from collections.abc import Iterable

import asyncpg

from job_service import metrics

QUEUE_DEPTH = """
SELECT queue, status, count(*) AS n FROM jobs
WHERE status = ANY($1::text[])
GROUP BY queue, status
"""

OUTBOX_BACKLOG = """
SELECT status, count(*) AS n,
       extract(epoch FROM now() - min(available_at) FILTER (WHERE available_at <= now()))
           ::float8 AS oldest_due_s
FROM outbox_events
WHERE status IN ('pending', 'processing', 'dead')
GROUP BY status
"""

OUTBOX_STATUSES = ("pending", "processing", "dead")


class DatabaseGauges:
    """Refreshes the database-backed gauges; ``queues`` are reported even when empty."""

    def __init__(self, pool: asyncpg.Pool, queues: Iterable[str]) -> None:
        self._pool = pool
        self._queues = sorted(set(queues))

    async def refresh(self) -> int:
        """One refresh; returns 0 (nothing "handled", for the housekeeping loop)."""
        statuses = [s.value for s in metrics.UNFINISHED]
        async with self._pool.acquire() as conn:
            depth = await conn.fetch(QUEUE_DEPTH, statuses)
            outbox = await conn.fetch(OUTBOX_BACKLOG)
        counts = {(r["queue"], r["status"]): r["n"] for r in depth}
        for queue in sorted({*self._queues, *(q for q, _ in counts)}):
            for status in statuses:
                metrics.QUEUE_DEPTH.labels(queue, status).set(counts.get((queue, status), 0))
        rows = {r["status"]: r for r in outbox}
        for status in OUTBOX_STATUSES:
            metrics.OUTBOX_ROWS.labels(status).set(rows[status]["n"] if status in rows else 0)
        ages = [
            r["oldest_due_s"]
            for s, r in rows.items()
            if s != "dead" and r["oldest_due_s"] is not None
        ]
        metrics.OUTBOX_OLDEST_DUE_AGE.set(max(ages, default=0.0))
        return 0
