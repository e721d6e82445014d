"""Job deadlines: the deadline keeper's round (every replica runs it; SKIP LOCKED shares the
work), which ends each unfinished job whose deadline has passed FAILED with
DEADLINE_EXCEEDED — whatever its retries left, its sleep or its signal wait — and tells the
worker of one that was running to stop it. Judged by the database clock."""

from __future__ import annotations

from typing import Protocol

from job_service import metrics
from job_service.domain.lifecycle import JobStatus
from job_service.ports.jobs import CancelNotifier
from job_service.ports.outbox import Waker
from job_service.usecases.stop_notices import tell_workers_to_stop

# Jobs one round ends; a full round runs again at once.
DEADLINE_BATCH = 200


class DeadlineStore(Protocol):
    async def end_passed(self, limit: int) -> list[tuple[str, str, JobStatus]]:
        """Ends up to ``limit`` jobs past their deadline: each one's id, job type and the
        status it was in."""
        ...


class JobDeadlines:
    def __init__(self, store: DeadlineStore, notifier: CancelNotifier, outbox: Waker) -> None:
        self._store = store
        self._notifier = notifier
        self._outbox = outbox

    async def end_passed(self) -> int:
        """One round: how many jobs it ended."""
        ended = await self._store.end_passed(DEADLINE_BATCH)
        for _, job_type, before in ended:
            metrics.deadline_exceeded(job_type, before)
        if ended:
            self._outbox.wake()  # their domain events (and freed slots' tokens) are due now
        await tell_workers_to_stop(
            self._notifier, [job_id for job_id, _, before in ended if before is JobStatus.RUNNING]
        )
        return len(ended)
