"""Rate limits at the call (ADR 0002): every provider call of a leased attempt is admitted
against the fleet-wide limit of the tier it calls, right before it is made, and a 429
blocks the tier that got it. The grant bucket (the claim's) decides which attempts start;
this decides when each of their calls may reach the provider.

A call takes the tier's next slot: a slot within CALL_CONFIRM_LEAD_S (granted: call at it),
or one reserved further ahead (the worker waits, then confirms it a moment before it is
due: granted unless a 429 blocked the tier meanwhile), or, when the next slot is further
ahead than CALL_SLOTS_AHEAD_S, nothing yet (ask again later). Slots are times on the
database's clock; the worker starts its call at the slot by its own wall clock, within
the slack after it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from job_service import metrics
from job_service.domain.checks import require_uuid
from job_service.domain.rate_limits import (
    CALL_CONFIRM_LEAD_S,
    CALL_SLOTS_AHEAD_S,
    DEFAULT_RETRY_AFTER_S,
    CallPermit,
    TierBudgets,
)
from job_service.ports.rate_limits import CallPermitStore
from shared.errors import FieldViolation, InternalError, InvalidInput

# A tier without a limit: the worker need not ask again for this long (a limit configured
# later reaches the workers within it).
UNLIMITED_FOR_S = 30.0
# The longest Retry-After a report may block a tier for.
MAX_RETRY_AFTER_S = 3600.0
# A confirmation this much earlier than its lead is answered "later", not granted.
EARLY_S = 0.05
# The shortest wait a refusal asks for.
MIN_WAIT_S = 0.01


class CallPermits:
    def __init__(self, store: CallPermitStore, budgets: TierBudgets, *, slack_s: float) -> None:
        self._store = store
        self._budgets = budgets
        self._limits = budgets.limits
        self._slack_s = slack_s

    async def ensure_buckets(self) -> None:
        """A slot row for each configured tier that has none yet."""
        if self._limits:
            await self._store.ensure(list(self._limits))

    async def acquire(
        self, job_id: str, lease_token: str, tier: str, reserved_slot: str = ""
    ) -> CallPermit:
        """One provider call of the attempt holding ``lease_token``, for ``tier``: now, or
        after how long to ask again (with the slot reserved for it, if one is). LeaseLost
        unless the token holds the job's lease."""
        _check(job_id, lease_token, tier)
        limit = self._limits.get(tier)
        if limit is None:
            await self._store.require_lease(job_id, lease_token)
            return CallPermit(granted=True, unlimited=True, valid_for_s=UNLIMITED_FOR_S)
        if reserved_slot:
            return await self._confirm(job_id, lease_token, tier, reserved_slot)
        for _ in range(2):
            slot = await self._store.take(
                job_id,
                lease_token,
                tier,
                per_second=limit.requests_per_second,
                capacity=limit.call_capacity(self._slack_s),
                recovery_s=self._budgets.recovery_s,
                ahead_s=CALL_SLOTS_AHEAD_S,
            )
            if slot is not None:
                break
            await self.ensure_buckets()  # configured after this replica started
        else:
            raise InternalError(f"no call slots for tier {tier!r}")
        if not slot.taken:
            metrics.call_permit(tier, "wait")
            return CallPermit(
                granted=False, retry_after_s=max(slot.wait_s - CALL_SLOTS_AHEAD_S, MIN_WAIT_S)
            )
        if slot.wait_s <= CALL_CONFIRM_LEAD_S:  # near enough: call at the slot
            metrics.call_permit(tier, "granted")
            return CallPermit(granted=True, valid_for_s=self._slack_s, slot_at=slot.at)
        metrics.call_permit(tier, "reserved")
        return CallPermit(
            granted=False,
            retry_after_s=slot.wait_s - CALL_CONFIRM_LEAD_S,
            valid_for_s=self._slack_s,
            reserved_slot=_slot_text(slot.at),
            slot_at=slot.at,
        )

    async def _confirm(self, job_id: str, lease_token: str, tier: str, slot: str) -> CallPermit:
        at = _slot_time(slot)
        ahead_s, blocked_s = await self._store.confirm(job_id, lease_token, tier, at)
        if blocked_s > 0:  # a 429 since: the slot is void, start again after the block
            metrics.call_permit(tier, "blocked")
            return CallPermit(granted=False, retry_after_s=blocked_s)
        if ahead_s > CALL_CONFIRM_LEAD_S + EARLY_S:
            return CallPermit(
                granted=False,
                retry_after_s=ahead_s - CALL_CONFIRM_LEAD_S,
                reserved_slot=slot,
                slot_at=at,
            )
        if ahead_s + self._slack_s <= 0:  # confirmed past its slack: void, ask again
            metrics.call_permit(tier, "late")
            return CallPermit(granted=False, retry_after_s=MIN_WAIT_S)
        metrics.call_permit(tier, "granted")
        return CallPermit(granted=True, valid_for_s=self._slack_s, slot_at=at)

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


def _slot_text(at: datetime) -> str:
    """A reserved slot as the worker passes it back: its time, in microseconds."""
    return str(round(at.timestamp() * 1_000_000))


def _slot_time(text: str) -> datetime:
    if not text.isdigit() or len(text) > 20:
        raise InvalidInput(
            "reserved_slot is not a slot this service reserved",
            [FieldViolation("reserved_slot", "as AcquireCallPermitResponse.reserved_slot")],
        )
    return datetime.fromtimestamp(int(text) / 1_000_000, UTC)
