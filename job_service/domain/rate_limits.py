"""Fleet-wide provider rate limits per model tier (JOBS_RATE_LIMITS): the limits, a tier's
bucket as read back, and what one replica remembers of the tiers between claims.

Two meters per tier, both rows every replica shares (ADR 0002, "Rate limits at the call"):

- the **grant bucket**: a claim spends one request and an estimate of the tokens per job it
  grants (``adapters/postgres/claims.py`` spends it, ``adapters/postgres/rate_limits.py``
  settles it) — admission, reserved ahead, so that a fleet does not start more attempts
  than the tier can serve;
- the **call slots**: every provider call takes a slot right before it is made — now, or
  reserved at most CALL_SLOTS_AHEAD_S ahead and confirmed when due (``AcquireCallPermit``;
  ``adapters/postgres/call_permits.py``). Slots are spaced 1 / rate apart with a burst
  tolerance (a generic cell rate algorithm); a call starts within ``slack`` of its slot,
  and the burst is smaller by rate x slack, so that, as the provider sees it, in any
  window of W seconds at most ``max(burst, 1 + rate x slack) + rate x W`` calls arrive.

A 429 blocks the tier that got it until the provider's Retry-After and halves its rate
factor once per block (never below MIN_RATE_FACTOR); the factor recovers additively from
the end of the block, in full JOBS_RATE_LIMIT_RECOVERY_S later.

The buckets' arithmetic (``elapsed_since``, ``recovered``, ``backed_off``, ``refilled``) is
decided in SQL, under the tier's row lock, by statements that render it from
``adapters/postgres/vocabulary/buckets.py``; the functions here are its pure twins
(``tests/integration/test_rate_bucket_twin.py`` evaluates one against the other).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

DEFAULT_RATE_RECOVERY_S = 30.0
# How soon after its permit was asked for a call must start (JOBS_RATE_LIMIT_CALL_SLACK_S);
# the call bucket holds less by rate x slack, so calls that start late within it still fit.
DEFAULT_CALL_SLACK_S = 0.2
# How far ahead a call may hold a slot (beyond, it asks again later): a slot its attempt
# no longer needs (cancelled, lease lost) is a gap in the tier's use, at most this long.
CALL_SLOTS_AHEAD_S = 30.0
# A claim grants a tier nothing while its calls wait for slots further ahead than this:
# attempts are admitted at the pace their calls are (the queue of calls stays short).
CALL_QUEUE_AHEAD_S = 5.0
# A reserved slot is confirmed this long before it is due (the confirmation's round trip
# is then off the call's slack); a 429 reported in between does not stop the call.
CALL_CONFIRM_LEAD_S = 0.1
# A 429 without a Retry-After blocks its tier this long.
DEFAULT_RETRY_AFTER_S = 1.0
MIN_RATE_FACTOR = 0.05
# How much each settled batch moves a tier's average of tokens per attempt.
SMOOTHING = 0.2


@dataclass(frozen=True)
class RateLimit:
    """A tier's fleet-wide limit: requests and tokens per minute, with bucket sizes."""

    key: str
    requests_per_minute: float
    tokens_per_minute: float = 0.0  # 0: no token limit
    # How much may be spent at once (the buckets' sizes); default one second of requests
    # (at least one) and five seconds of tokens.
    burst_requests: float = 0.0
    burst_tokens: float = 0.0

    @property
    def request_burst(self) -> float:
        return self.burst_requests or max(1.0, self.requests_per_minute / 60)

    @property
    def token_burst(self) -> float:
        return self.burst_tokens or self.tokens_per_minute / 12

    @property
    def requests_per_second(self) -> float:
        return self.requests_per_minute / 60

    def call_capacity(self, slack_s: float) -> float:
        """The call bucket's size: the burst less what ``slack_s`` of calls may add, at
        least one call."""
        return max(1.0, self.request_burst - self.requests_per_second * slack_s)

    def seconds_until(self, requests: float, tokens: float, need_tokens: float, f: float) -> float:
        """How long until one more request (and ``need_tokens``) fits, at factor ``f``."""
        wait = max(0.0, 1 - requests) * 60 / (self.requests_per_minute * f)
        if self.tokens_per_minute:
            need = min(need_tokens, self.token_burst)
            wait = max(wait, max(0.0, need - tokens) * 60 / (self.tokens_per_minute * f))
        return wait


def elapsed_since(refilled_at: datetime, clock: datetime) -> float:
    """The seconds a tier's bucket has had to refill and recover by ``clock``: none while a
    429's block lasts (the block sets ``refilled_at`` at its end)."""
    return max((clock - refilled_at).total_seconds(), 0.0)


def recovered(factor: float, elapsed_s: float, recovery_s: float) -> float:
    """A tier's back-off factor ``elapsed_s`` after its last refill: the additive increase
    of AIMD, from ``factor`` back to 1 in full ``recovery_s`` after a 429 (from 0)."""
    return min(1.0, factor + elapsed_s / recovery_s)


def backed_off(factor: float, floor: float = MIN_RATE_FACTOR) -> float:
    """A tier's factor after the first 429 of a block: the multiplicative decrease, halved
    (from the factor recovered until then), never below ``floor``."""
    return max(floor, factor / 2)


def refilled(
    level: float, elapsed_s: float, *, per_minute: float, capacity: float, factor: float
) -> float:
    """One meter of a tier's bucket (requests or tokens) ``elapsed_s`` after its last
    refill: refilled at ``per_minute`` times the factor it had then (not the recovered
    one: the rate rose during the interval, this counts it at its start), at most
    ``capacity``. In the order the SQL computes it, so that both round alike."""
    return min(capacity, level + elapsed_s * per_minute / 60 * factor)


@dataclass(frozen=True)
class BucketLevel:
    """What a claim's spend left in a tier's bucket: how many grants fitted, and the
    bucket after them."""

    granted: int
    requests_available: float
    tokens_left: float
    factor: float
    blocked_until: datetime | None


@dataclass(frozen=True)
class CallSlot:
    """A tier's next call slot: when (``at``, ``wait_s`` from now), and whether it was
    taken (it was near enough)."""

    taken: bool
    at: datetime
    wait_s: float


@dataclass(frozen=True)
class CallPermit:
    """The answer to one provider call asking for a permit: make it now (``granted``), or
    ask again after ``retry_after_s`` — with ``reserved_slot`` when a slot is held for it
    (at ``slot_at``). ``valid_for_s``: granted, the call must start within this long after
    ``slot_at``; unlimited (the tier has no limit), how long not to ask again."""

    granted: bool
    retry_after_s: float = 0.0
    valid_for_s: float = 0.0
    unlimited: bool = False
    reserved_slot: str = ""
    slot_at: datetime | None = None  # the call's slot, granted or reserved


@dataclass(frozen=True)
class BucketState:
    """A tier's rate-limit bucket as of now (refilled for the time since its last claim)."""

    limit: RateLimit
    requests_available: float
    tokens_available: float
    factor: float
    blocked_until: datetime | None
    throttled_total: int
    waiting: int


class TierBudgets:
    """What this replica remembers of the rate-limited tiers between claims: which tiers
    had no budget at their last claim here, until when (a claim's scan passes their jobs
    over instead of locking them for nothing), and what an attempt of each tier really
    uses (what its next grants reserve, instead of the definitions' estimate)."""

    def __init__(self, limits: Mapping[str, RateLimit], recovery_s: float) -> None:
        self.limits = dict(limits)
        self.recovery_s = recovery_s
        self._spent_until: dict[str, float] = {}  # tier -> monotonic time budget returns
        self._tokens_per_attempt: dict[str, float] = {}

    def tokens_each(self, tier: str, estimate: int) -> int:
        """The tokens each grant of the tier reserves: the running average of what its
        attempts really used, once known (``estimate`` before), at most a bucket's worth;
        0 when the tier has no token limit."""
        limit = self.limits[tier]
        each = round(self._tokens_per_attempt.get(tier, estimate))
        return min(each, int(limit.token_burst)) if limit.tokens_per_minute else 0

    def spent(self, tier: str, wanted: int, tokens_each: int, level: BucketLevel) -> None:
        """A claim asked the tier for ``wanted`` grants and got ``level``: when not all
        fitted, the tier is spent until one more would."""
        if level.granted >= wanted:
            self._spent_until.pop(tier, None)
            return
        wait = self.limits[tier].seconds_until(
            level.requests_available, level.tokens_left, tokens_each, level.factor
        )
        if level.blocked_until is not None:
            wait = max(wait, level.blocked_until.timestamp() - time.time())
        self._spent_until[tier] = time.monotonic() + max(wait, 0.01)

    def throttled(self, tier: str, retry_after_s: float) -> None:
        """A 429 blocked the tier for ``retry_after_s``."""
        self._spent_until[tier] = time.monotonic() + retry_after_s

    def settled(self, tier: str, used: float, attempts: int) -> None:
        """``attempts`` of the tier ended, using ``used`` tokens in all."""
        average = used / attempts
        known = self._tokens_per_attempt.get(tier)
        self._tokens_per_attempt[tier] = (
            average if known is None else known + SMOOTHING * (average - known)
        )

    def spent_keys(self) -> list[str]:
        """The tiers that had no budget at their last claim here and have not refilled."""
        now = time.monotonic()
        return [key for key, until in self._spent_until.items() if until > now]

    def seconds_until_budget(self) -> float:
        """How long until the first spent tier has budget again (at least 10 ms)."""
        now = time.monotonic()
        waits = [until - now for until in self._spent_until.values() if until > now]
        return max(min(waits, default=0.0), 0.01)


def parse_rate_limits(text: str) -> dict[str, RateLimit]:
    """JOBS_RATE_LIMITS: a JSON object from model tier to its limits."""
    if not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        raise ValueError("JOBS_RATE_LIMITS must be a JSON object") from None
    if not isinstance(raw, dict):
        raise ValueError("JOBS_RATE_LIMITS must be a JSON object of tier -> limits")
    limits = {}
    for key, spec in raw.items():
        if not isinstance(spec, dict) or set(spec) - set(_RATE_FIELDS):
            raise ValueError(f"JOBS_RATE_LIMITS[{key!r}]: known fields are {_RATE_FIELDS}")
        values = {name: spec.get(name, 0) for name in _RATE_FIELDS}
        if any(not isinstance(v, int | float) or v < 0 for v in values.values()):
            raise ValueError(f"JOBS_RATE_LIMITS[{key!r}]: limits are non-negative numbers")
        if values["requests_per_minute"] <= 0:
            raise ValueError(f"JOBS_RATE_LIMITS[{key!r}]: requests_per_minute must be > 0")
        limits[key] = RateLimit(key=key, **{k: float(v) for k, v in values.items()})
    return limits


_RATE_FIELDS = ("requests_per_minute", "tokens_per_minute", "burst_requests", "burst_tokens")
