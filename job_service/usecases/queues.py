"""Queues as operators see them: pause and resume, their state, the rate limits that hold
their jobs back, why one waiting job waits (``domain/holds.py``), and the gauges of these
(jobs no live worker runs, the tiers' buckets)."""

from __future__ import annotations

from collections.abc import Sequence

from job_service import metrics
from job_service.domain.declared_types import JobTypes
from job_service.domain.holds import Hold, explain
from job_service.domain.jobs import Job
from job_service.domain.queues import QueueState
from job_service.domain.rate_limits import BucketState
from job_service.ports.queues import QueueStore
from job_service.ports.rate_limits import RateLimitStore
from shared.errors import ErrorCode, FieldViolation, InvalidInput


class Queues:
    def __init__(self, registry: JobTypes, queues: QueueStore, rates: RateLimitStore) -> None:
        self._queues = queues
        self._rates = rates
        self._types = registry

    @property
    def _queue_names(self) -> list[str]:
        return self._types.derived("queue_names", lambda t: sorted({d.queue for d in t}))

    async def pause(self, queue: str, principal: str) -> QueueState:
        require_queue(queue, self._queue_names)
        await self._queues.pause(queue, principal)
        return await self._state(queue)

    async def resume(self, queue: str) -> QueueState:
        require_queue(queue, self._queue_names)
        await self._queues.resume(queue)
        return await self._state(queue)

    async def states(self) -> list[QueueState]:
        return await self._queues.states(self._queue_names)

    async def rate_limits(self) -> list[BucketState]:
        return await self._rates.states()

    async def hold(self, job: Job) -> Hold | None:
        """Why a waiting job is not running (None when it does not wait)."""
        facts = await self._queues.waiting_facts(job.id, self._rates.spent_keys())
        return None if facts is None else explain(facts)

    async def refresh_gauges(self) -> int:
        """The queues' database gauges: rate-limit state, jobs without a worker."""
        metrics.JOBS_WITHOUT_WORKER.set(await self._queues.without_worker())
        suspended = await self._queues.suspended()
        metrics.JOBS_SUSPENDED.labels("sleep").set(suspended[ErrorCode.SUSPENDED_SLEEP])
        metrics.JOBS_SUSPENDED.labels("signal").set(suspended[ErrorCode.SUSPENDED_SIGNAL])
        for bucket in await self._rates.states():
            tier = bucket.limit.key
            metrics.RATE_LIMIT_FACTOR.labels(tier).set(bucket.factor)
            metrics.RATE_LIMIT_REQUESTS_AVAILABLE.labels(tier).set(bucket.requests_available)
            metrics.RATE_LIMIT_TOKENS_AVAILABLE.labels(tier).set(bucket.tokens_available)
            metrics.RATE_LIMIT_WAITING.labels(tier).set(bucket.waiting)
            metrics.RATE_LIMIT_THROTTLED.labels(tier).set(bucket.throttled_total)
        return 0

    async def _state(self, queue: str) -> QueueState:
        [state] = await self._queues.states([queue])
        return state


def require_queue(queue: str, known: Sequence[str]) -> None:
    """InvalidInput unless ``queue`` is one of the registry's queues."""
    if queue not in known:
        raise InvalidInput(
            f"unknown queue {queue!r}",
            [FieldViolation("queue", "one of: " + ", ".join(known))],
        )
