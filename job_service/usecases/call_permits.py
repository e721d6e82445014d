"""Rate limits at the call (ADR 0002): every provider call of a leased attempt is admitted
against the fleet-wide limit of the tier it calls, right before it is made, and a 429
blocks the tier that got it. The grant bucket (the claim's) decides which attempts start;
this decides when each of their calls may reach the provider."""

from __future__ import annotations

from datetime import datetime

from job_service import metrics
from job_service.domain.checks import require_uuid
from job_service.domain.rate_limits import DEFAULT_RETRY_AFTER_S, CallPermit, TierBudgets
from job_service.ports.rate_limits import CallPermitStore
from shared.errors import FieldViolation, InternalError, InvalidInput

# A tier without a limit: the worker need not ask again for this long (a limit configured
# later reaches the workers within it).
UNLIMITED_FOR_S = 30.0
# The longest Retry-After a report may block a tier for.
MAX_RETRY_AFTER_S = 3600.0
# The shortest wait a refusal asks for.
MIN_WAIT_S = 0.01


class CallPermits:
    def __init__(self, store: CallPermitStore, budgets: TierBudgets, *, slack_s: float) -> None:
        self._store = store
        self._budgets = budgets
        self._limits = budgets.limits
        self._slack_s = slack_s

    async def ensure_buckets(self) -> None:
        """A full call bucket for each configured tier that has none yet."""
        if self._limits:
            await self._store.ensure(
                {key: limit.call_capacity(self._slack_s) for key, limit in self._limits.items()}
            )

    async def acquire(self, job_id: str, lease_token: str, tier: str) -> CallPermit:
        """One provider call of the attempt holding ``lease_token``, for ``tier``: now, or
        after how long to ask again. LeaseLost unless the token holds the job's lease."""
        _check(job_id, lease_token, tier)
        limit = self._limits.get(tier)
        if limit is None:
            return CallPermit(granted=True, unlimited=True, valid_for_s=UNLIMITED_FOR_S)
        for _ in range(2):
            taken = await self._store.take(
                job_id,
                lease_token,
                tier,
                per_second=limit.requests_per_second,
                capacity=limit.call_capacity(self._slack_s),
                recovery_s=self._budgets.recovery_s,
            )
            if taken is not None:
                break
            await self.ensure_buckets()  # configured after this replica started
        else:
            raise InternalError(f"no call bucket for tier {tier!r}")
        granted, level, factor, blocked_for = taken
        metrics.call_permit(tier, granted=granted)
        if granted:
            return CallPermit(granted=True, valid_for_s=self._slack_s)
        wait = (
            blocked_for if blocked_for > 0 else (1 - level) / (limit.requests_per_second * factor)
        )
        return CallPermit(granted=False, retry_after_s=max(wait, MIN_WAIT_S))

    async def rate_limited(
        self, job_id: str, lease_token: str, tier: str, retry_after_s: float
    ) -> datetime | None:
        """A call of the attempt holding ``lease_token`` got a 429 from ``tier``'s provider:
        the tier is blocked for ``retry_after_s`` (a second when 0); until when (None: the
        tier has no limit)."""
        _check(job_id, lease_token, tier)
        if not 0 <= retry_after_s <= MAX_RETRY_AFTER_S:
            raise InvalidInput(
                "retry_after_ms is out of range",
                [FieldViolation("retry_after_ms", f"0 to {int(MAX_RETRY_AFTER_S * 1000)}")],
            )
        await self._store.require_lease(job_id, lease_token)
        if tier not in self._limits:
            return None
        block_s = retry_after_s or DEFAULT_RETRY_AFTER_S
        blocked = await self._store.throttle(tier, block_s, self._budgets.recovery_s)
        if blocked is not None:
            self._budgets.throttled(tier, block_s)
        return blocked


def _check(job_id: str, lease_token: str, tier: str) -> None:
    require_uuid("job_id", job_id)
    require_uuid("lease_token", lease_token)
    if not tier or len(tier) > 64:
        raise InvalidInput(
            "model_tier is required", [FieldViolation("model_tier", "a model tier, 1..64 chars")]
        )
