"""Claims: the choice of waiting jobs and their lease to a worker, whichever door the grants
then leave by (``usecases/grants.py``: work tokens, pushes, lock on submit).

A claim of a queue, in one transaction: the candidates in line order, their concurrency
keys counted under locks, the admission (``domain/claims.py``), the admitted jobs' rate
reservations, the grant; then, for the tokens left unused, when to hand them back. A queue
nothing can hold a job back in is claimed in one statement. The claim's exactness (no job
granted twice, no limit exceeded across replicas) is the claim transaction's
(``ports/claims.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from job_service import metrics
from job_service.domain.claims import (
    CANDIDATE_SLACK,
    CONTENDED_RECHECK_S,
    VERSION_RECHECK_S,
    ClaimCandidate,
    Granted,
    admit,
    keys_to_count,
    rate_demand,
    within_rate,
)
from job_service.domain.declared_types import JobTypes
from job_service.domain.grants import LockGrant, LockRefusal, QueueClaim
from job_service.domain.outbox import DispatchMark
from job_service.domain.rate_limits import TierBudgets
from job_service.ports.claims import ClaimStore, ClaimTransaction
from job_service.ports.rate_limits import RateLimitStore
from job_service.usecases.known_jobs import KnownJobs

# A worker's definitions are written at most this often (each claim would otherwise).
WORKER_RECORD_INTERVAL_S = 5.0


class Claims:
    def __init__(
        self,
        registry: JobTypes,
        store: ClaimStore,
        rates: RateLimitStore,
        budgets: TierBudgets,
        *,
        queue_limits: Mapping[str, int],
        known: KnownJobs | None = None,
    ) -> None:
        """``known``: where every grant's type, version and owner are kept for its submit."""
        self._store = store
        self._known = known
        self._rates = rates
        self._budgets = budgets
        self._queue_limits = dict(queue_limits)
        self._types = registry
        self._workers_seen: dict[tuple[str, str, tuple[str, ...]], float] = {}

    @property
    def queue_names(self) -> list[str]:
        """The queues of the known job types, sorted."""
        return self._types.derived("queue_names", lambda t: sorted({d.queue for d in t}))

    @property
    def _queue_types(self) -> dict[str, frozenset[str]]:
        return self._types.derived("queue_job_types", queue_job_types)

    @property
    def _estimated_tokens(self) -> dict[str, int]:
        return self._types.derived("tier_estimates", tier_estimates)

    @property
    def _unlimited(self) -> frozenset[str]:
        return self._types.derived(
            "unlimited_queues",
            lambda t: unlimited_queues(t, self._queue_limits, self._budgets.limits),
        )

    async def claim_queue(
        self,
        queue: str,
        want: int,
        worker_id: str,
        definitions: list[str] | None,
        *,
        tokens: bool = True,
        due_for_s: float = 0.0,
        mark: DispatchMark | None = None,
    ) -> QueueClaim:
        """Grants up to ``want`` of the queue's best eligible jobs to ``worker_id``, of the
        ``definitions`` it runs (None: any), due for ``due_for_s`` at least, and says when
        to hand the unused tokens back (``tokens``: the claim answers work tokens; without,
        it never says). ``mark``: dispatch rows the grants use (pushed grants), marked
        published by the grant's statement."""
        await self._record_worker(worker_id, queue, definitions)
        if queue in self._unlimited:
            # nothing to admit: one statement scans and grants, as before the scheduler;
            # the unused tokens' answer costs a second one
            async with self._store.connection() as tx:
                granted = await tx.grant_unlimited(
                    queue, definitions, want, worker_id, due_for_s, mark
                )
                retry_after = None
                if tokens and len(granted) < want:
                    retry_after = await self._unused_back(tx, queue, definitions, False)
            return QueueClaim(_picked_up(granted, self._known), retry_after)
        spent = self._budgets.spent_keys()
        async with self._store.transaction() as tx:
            candidates = await tx.candidates(
                queue, definitions, want * CANDIDATE_SLACK, spent, due_for_s
            )
            chosen, held_by_rate = await self._admit(tx, self._rated(candidates), want, queue)
            granted = await tx.grant(chosen, worker_id, mark) if chosen else []
            retry_after = None
            if tokens and len(granted) < want:
                held_by_rate = held_by_rate or (bool(spent) and await tx.rate_held(queue, spent))
                retry_after = await self._unused_back(tx, queue, definitions, held_by_rate)
        return QueueClaim(_picked_up(granted, self._known), retry_after)

    async def claim_jobs(
        self, job_ids: Sequence[str], worker_id: str, definitions: Sequence[str] | None
    ) -> list[LockGrant | LockRefusal]:
        """Grants the named jobs (distinct ids) that are eligible, of the ``definitions``
        the worker runs (None: any) and within the limits; answers per id, in order. A
        refusal carries ``retry_after`` when the job is not due yet, only held back by a
        limit, or of a version this worker does not run (another worker may)."""
        granted: dict[str, LockGrant] = {}
        held: list[str] = []
        async with self._store.transaction() as tx:
            named = await tx.named_candidates(job_ids, definitions)
            held += [c.job_id for _, c, runnable in named if not runnable]
            runnable = [(q, c) for q, c, runs in named if runs]
            for queue in dict.fromkeys(q for q, _ in runnable):
                candidates = self._rated([c for q, c in runnable if q == queue])
                chosen, _ = await self._admit(tx, candidates, len(candidates), queue)
                chosen_granted = await tx.grant(chosen, worker_id) if chosen else []
                for grant in _picked_up(chosen_granted, self._known):
                    granted[grant.job_id] = grant
                held += [c.job_id for c in candidates if c.job_id not in granted]
            refused = [job_id for job_id in job_ids if job_id not in granted]
            not_due = await tx.not_due(refused) if refused else {}
        recheck = datetime.now(UTC) + timedelta(seconds=VERSION_RECHECK_S)
        not_due |= {job_id: recheck for job_id in held}
        return [granted.get(job_id) or LockRefusal(not_due.get(job_id)) for job_id in job_ids]

    async def _admit(
        self, tx: ClaimTransaction, candidates: list[ClaimCandidate], want: int, queue: str
    ) -> tuple[list[tuple[str, int]], bool]:
        """The candidates to grant, (job id, tokens it reserves), and whether a rate limit
        held any back."""
        queue_limit = self._queue_limits.get(queue, 0)
        keys = keys_to_count(candidates, queue, queue_limit)
        running = await tx.count_running(keys, [queue] if queue_limit else []) if keys else {}
        admitted = admit(candidates, want, running, queue, queue_limit)
        demand = rate_demand(admitted)
        if not demand:
            return [(c.job_id, 0) for c in admitted], False
        granted, tokens = {}, {}
        for tier, n in demand.items():
            granted[tier], tokens[tier] = await self._reserve(tx, tier, n)
        chosen = within_rate(admitted, granted)
        return (
            [(c.job_id, tokens[c.rate_key] if c.rate_key else 0) for c in chosen],
            len(chosen) < len(admitted),
        )

    async def _reserve(self, tx: ClaimTransaction, tier: str, wanted: int) -> tuple[int, int]:
        """Spends the tier's budget on up to ``wanted`` grants: (grants that fit, tokens
        each one reserved)."""
        each = self._budgets.tokens_each(tier, self._estimated_tokens.get(tier, 0))
        level = await tx.reserve(
            self._budgets.limits[tier], self._budgets.recovery_s, [each] * wanted
        )
        if level is None:  # no bucket (configured after start-up): grant nothing until it is
            await self._rates.ensure_buckets()
            return 0, each
        self._budgets.spent(tier, wanted, each, level)
        return level.granted, each

    async def _unused_back(
        self,
        tx: ClaimTransaction,
        queue: str,
        definitions: Sequence[str] | None,
        held_by_rate: bool,
    ) -> datetime | None:
        """When an unused token should come back, or None to drop it. Back once the rate
        limit that held jobs back has budget again; shortly when grantable jobs still wait
        (rows a concurrent claim had locked: it may not grant them); after a second when
        due jobs wait for a worker of another version. Jobs held by a full concurrency key
        get a new token when a job of the key ends, a paused queue's when it resumes: with
        only those left, the token is dropped."""
        now = datetime.now(UTC)
        if held_by_rate:
            return now + timedelta(seconds=self._budgets.seconds_until_budget())
        left = await tx.waiting_left(queue, definitions)
        if left.mine:
            return now + timedelta(seconds=CONTENDED_RECHECK_S)
        if left.others:
            return now + timedelta(seconds=VERSION_RECHECK_S)
        return None

    def _rated(self, candidates: list[ClaimCandidate]) -> list[ClaimCandidate]:
        """The candidates with a rate key only where their tier has a limit."""
        limits = self._budgets.limits
        return [c if c.rate_key in limits else replace(c, rate_key=None) for c in candidates]

    async def _record_worker(
        self, worker_id: str, queue: str, definitions: Sequence[str] | None
    ) -> None:
        """Remembers what the worker runs of ``queue``, the queue it claims from (for holds
        and the no-worker-for-version gauge), at most every few seconds per worker and
        queue. Only that queue's job types count: a definition the worker has loaded but
        whose queue it does not consume runs nowhere."""
        if definitions is None:
            return
        types = self._queue_types.get(queue, frozenset())
        runs = [d for d in definitions if d.partition("@")[0] in types]
        key = (worker_id, queue, tuple(runs))
        now = datetime.now(UTC).timestamp()
        if now - self._workers_seen.get(key, 0.0) < WORKER_RECORD_INTERVAL_S:
            return
        self._workers_seen[key] = now
        await self._store.record_worker(worker_id, sorted(types), runs)


def _picked_up(granted: list[Granted], known: KnownJobs | None = None) -> list[LockGrant]:
    for grant, waited_s in granted:
        metrics.picked_up(grant.job_type, waited_s)
    grants = [grant for grant, _ in granted]
    if known is not None:
        known.granted(grants)
    return grants


def tier_estimates(registry: JobTypes) -> dict[str, int]:
    """Per model tier, the tokens a grant reserves: the largest estimate of its job types."""
    estimates: dict[str, int] = {}
    for definition in registry:
        if definition.model_tier:
            tier = str(definition.model_tier)
            estimates[tier] = max(estimates.get(tier, 0), definition.estimated_tokens)
    return estimates


def queue_job_types(registry: JobTypes) -> dict[str, frozenset[str]]:
    """Per queue, the job types whose jobs wait in it."""
    types: dict[str, set[str]] = {}
    for definition in registry:
        types.setdefault(definition.queue, set()).add(definition.job_type)
    return {queue: frozenset(names) for queue, names in types.items()}


def unlimited_queues(
    registry: JobTypes, queue_limits: Mapping[str, int], rate_tiers: Collection[str]
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
