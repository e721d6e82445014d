"""The metrics that need the database: queue depth, each queue's eligible jobs and pause,
and the outbox backlog.

Read by a housekeeping loop every ``JOBS_METRICS_COLLECT_INTERVAL_S`` (never per request):
two grouped counts over the partial and status indexes. Every replica reports the same
figures (they describe the shared database): aggregate them with ``max``, not ``sum``.
"""

from __future__ import annotations

from collections.abc import Iterable

from job_service import metrics
from job_service.domain.lifecycle import UNFINISHED, status_values
from job_service.domain.outbox import OutboxStatus
from job_service.ports.gauges import OutboxBacklog, QueueDepth


class DatabaseGauges:
    """Refreshes the database-backed gauges; ``queues`` are reported even when empty."""

    def __init__(self, depth: QueueDepth, outbox: OutboxBacklog, queues: Iterable[str]) -> None:
        self._depth = depth
        self._outbox = outbox
        self._queues = sorted(set(queues))

    async def refresh(self) -> int:
        """One refresh; returns 0 (nothing "handled", for the housekeeping loop)."""
        statuses = status_values(UNFINISHED)
        counts = await self._depth.queue_depth(statuses)
        backlog = await self._outbox.backlog()
        for queue in sorted({*self._queues, *(q for q, _ in counts)}):
            for status in statuses:
                metrics.QUEUE_DEPTH.labels(queue, status).set(counts.get((queue, status), 0))
        readiness = await self._depth.queue_readiness(self._queues)
        for queue, (paused, due) in readiness.items():
            metrics.QUEUE_PAUSED.labels(queue).set(1 if paused else 0)
            metrics.QUEUE_ELIGIBLE.labels(queue).set(0 if paused else due)
        for status, (rows, _) in backlog.items():
            metrics.OUTBOX_ROWS.labels(status.value).set(rows)
        ages = [
            age
            for status, (_, age) in backlog.items()
            if status is not OutboxStatus.DEAD and age is not None
        ]
        metrics.OUTBOX_OLDEST_DUE_AGE.set(max(ages, default=0.0))
        return 0
