"""The scheduler's use cases: grant work to a worker (a claim per queue token, or the
named jobs of a worker that predates tokens), pause and resume queues, report the rate
limits, feed a provider's 429 back, settle token reservations, and explain why a job waits.

The policy itself (line order, limits) is ``domain/scheduling.py``; the claim's exactness
(no job granted twice, no limit exceeded across replicas) is the claims adapter's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping, Sequence

from job_service import metrics
from job_service.domain.models import Job, LockGrant, LockRefusal
from job_service.domain.scheduling import BucketState, Hold, QueueState, explain
from job_service.ports.scheduling import ClaimStore, QueueStore, RateLimitStore
from job_service.usecases.checks import is_uuid, require_batch, require_name
from shared.ai.provider import UsageRecord
from shared.errors import ErrorCode, FieldViolation, InvalidInput
from shared.registry import Registry

log = logging.getLogger(__name__)

# A worker names at most this many definitions it runs, each as job_type@version.
MAX_RUNNABLE = 256
DEFINITION_ID = re.compile(r"[a-z][a-z0-9_]{1,63}@[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


class Scheduler:
    def __init__(
        self,
        registry: Registry,
        claims: ClaimStore,
        queues: QueueStore,
        rates: RateLimitStore,
    ) -> None:
        self._claims = claims
        self._queues = queues
        self._rates = rates
        self._queue_names = sorted({d.queue for d in registry})

    async def lock_jobs(
        self,
        job_ids: Sequence[str],
        worker_id: str,
        queue: str = "",
        runnable: Sequence[str] = (),
    ) -> list[LockGrant | LockRefusal]:
        """One answer per request, in order. With ``queue``, each request is a work token
        of that queue and the claim chooses the jobs; without, each names its job. A
        malformed, unknown or repeated id is refused: a job is never granted twice."""
        require_name("worker_id", worker_id)
        require_batch("requests", job_ids)
        if len(runnable) > MAX_RUNNABLE or not all(map(DEFINITION_ID.fullmatch, runnable)):
            raise InvalidInput(
                "runnable_definitions is malformed",
                [
                    FieldViolation(
                        "runnable_definitions",
                        f"at most {MAX_RUNNABLE} of job_type@version",
                    )
                ],
            )
        if not queue:
            distinct = list(dict.fromkeys(j for j in job_ids if is_uuid(j)))
            granted = await self._claims.claim_jobs(distinct, worker_id)
            answers = dict(zip(distinct, granted, strict=True))
            refused = LockRefusal()
            return [answers.pop(job_id, refused) for job_id in job_ids]
        self._require_queue(queue)
        claim = await self._claims.claim_queue(
            queue, len(job_ids), worker_id, list(runnable) or None
        )
        unused = len(job_ids) - len(claim.grants)
        metrics.tokens_unused(queue, unused, handed_back=claim.retry_after is not None)
        return [*claim.grants, *[LockRefusal(claim.retry_after)] * unused]

    async def pause(self, queue: str, principal: str) -> QueueState:
        self._require_queue(queue)
        await self._queues.pause(queue, principal)
        return await self._state(queue)

    async def resume(self, queue: str) -> QueueState:
        self._require_queue(queue)
        await self._queues.resume(queue)
        return await self._state(queue)

    async def queues(self) -> list[QueueState]:
        return await self._queues.states(self._queue_names)

    async def rate_limits(self) -> list[BucketState]:
        return await self._rates.states()

    async def attempt_ended(
        self,
        job_id: str,
        usage: Sequence[UsageRecord],
        error_code: str = "",
        retry_after_s: float = 0.0,
    ) -> None:
        """An attempt ended with this usage: its tier's reservation is settled, and a 429
        (with the provider's Retry-After) backs the tier off. Called after the attempt's
        outcome is committed: a failure here is logged, never the caller's."""
        await self.attempts_ended([(job_id, usage)])
        if error_code == ErrorCode.PROVIDER_RATE_LIMITED:
            try:
                await self._rates.throttled(job_id, retry_after_s)
            except Exception:
                log.warning(
                    "job %s: the 429 could not be applied to its tier", job_id, exc_info=True
                )

    async def attempts_ended(self, ended: Sequence[tuple[str, Sequence[UsageRecord]]]) -> None:
        """Settles the ended attempts' token reservations (best effort: an unsettled one
        only keeps its reservation, and the tier's budget refills anyway)."""
        used = [
            (job_id, sum(u.input_tokens + u.output_tokens for u in usage))
            for job_id, usage in ended
        ]
        try:
            await self._rates.settle(used)
        except Exception:
            log.warning("settling %d token reservations failed", len(used), exc_info=True)

    async def hold(self, job: Job) -> Hold | None:
        """Why a waiting job is not running (None when it does not wait)."""
        facts = await self._queues.waiting_facts(job.id, self._rates.spent_keys())
        return None if facts is None else explain(facts)

    async def refresh_gauges(self) -> int:
        """The scheduler's database gauges: rate-limit state, jobs without a worker."""
        metrics.JOBS_WITHOUT_WORKER.set(await self._queues.without_worker())
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

    def _require_queue(self, queue: str) -> None:
        if queue not in self._queue_names:
            raise InvalidInput(
                f"unknown queue {queue!r}",
                [FieldViolation("queue", "one of: " + ", ".join(self._queue_names))],
            )


def tier_estimates(registry: Registry) -> dict[str, int]:
    """Per model tier, the tokens a grant reserves: the largest estimate of its job types."""
    estimates: dict[str, int] = {}
    for definition in registry:
        if definition.model_tier:
            tier = str(definition.model_tier)
            estimates[tier] = max(estimates.get(tier, 0), definition.estimated_tokens)
    return estimates


def unlimited_queues(
    registry: Registry, queue_limits: Mapping[str, int], rate_tiers: Collection[str]
) -> frozenset[str]:
    """The queues no limit applies to: no queue limit, and no job type with a concurrency
    key or on a rate-limited model tier. Their claims need no admission step."""
    limited = set(queue_limits)
    for definition in registry:
        if definition.concurrency_key or (
            definition.model_tier and str(definition.model_tier) in rate_tiers
        ):
            limited.add(definition.queue)
    return frozenset({d.queue for d in registry} - limited)
