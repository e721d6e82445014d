"""The scheduling policy: which of a queue's waiting jobs a claim grants, and why a job
that waits is held back. Pure: the postgres adapter supplies the numbers.

Every waiting job has a place in line, ``sched_key`` (epoch seconds; lower runs first),
fixed when it becomes waiting:

    sched_key = max(due - priority * step,  last key of its fairness key at its priority + quantum)

- ``due`` is now, or the time a delayed job (``run_at``/``delay``) or a retry becomes due;
- one priority level is worth ``step`` seconds of waiting (JOBS_SCHED_PRIORITY_STEP_S), so a
  job is overtaken only by work created less than (priority difference x step) after it:
  waiting ages it, and nothing starves;
- a fairness key (the user, or an input field) with a backlog takes one place per
  ``quantum`` seconds (JOBS_SCHED_FAIR_QUANTUM_S): a user who submits 5,000 jobs lines
  them up 5,000 quanta deep, and another user's job created meanwhile takes its place at
  now, ahead of that backlog's tail.

A claim walks a queue in line order (an index scan, ``FOR UPDATE SKIP LOCKED``) and grants
the first candidates that the limits below allow: concurrency keys and the queue's limit
(counted under an advisory lock per key, so replicas cannot both fill the last slot) and
the fleet-wide rate limit of the job's model tier (a token bucket row per tier).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

DEFAULT_PRIORITY_STEP_S = 10.0
DEFAULT_FAIR_QUANTUM_S = 0.05
# A 429 halves a tier's effective rate (never below MIN_RATE_FACTOR; rate_limits.py's
# THROTTLED); it recovers additively, in full after this long.
DEFAULT_RATE_RECOVERY_S = 30.0
MIN_RATE_FACTOR = 0.05
# A token held back only until a worker for its version turns up is handed back this long.
VERSION_RECHECK_S = 1.0


def queue_key(queue: str) -> str:
    """The concurrency key a queue's limit is counted under."""
    return f"queue:{queue}"


def definition_id(job_type: str, version: str) -> str:
    """How a worker names a definition it runs: ``job_type@version``."""
    return f"{job_type}@{version}"


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

    def seconds_until(self, requests: float, tokens: float, need_tokens: float, f: float) -> float:
        """How long until one more request (and ``need_tokens``) fits, at factor ``f``."""
        wait = max(0.0, 1 - requests) * 60 / (self.requests_per_minute * f)
        if self.tokens_per_minute:
            need = min(need_tokens, self.token_burst)
            wait = max(wait, max(0.0, need - tokens) * 60 / (self.tokens_per_minute * f))
        return wait


@dataclass(frozen=True)
class Candidate:
    """A waiting job a claim may grant, in line order."""

    job_id: str
    concurrency_key: str | None = None
    concurrency_limit: int = 0
    # The model tier, when it has a rate limit.
    rate_key: str | None = None


def keys_to_count(candidates: Iterable[Candidate], queue: str, queue_limit: int) -> list[str]:
    """The concurrency keys a claim of ``candidates`` must count (and lock), sorted."""
    keys = {c.concurrency_key for c in candidates if c.concurrency_key}
    if queue_limit:
        keys.add(queue_key(queue))
    return sorted(keys)


def admit(
    candidates: Sequence[Candidate],
    want: int,
    running: Mapping[str, int],
    queue: str,
    queue_limit: int,
) -> list[Candidate]:
    """Up to ``want`` candidates, in line order, such that no concurrency key (nor the
    queue) runs more than its limit: ``running`` counts what already runs per key."""
    counts = Counter(running)
    qkey = queue_key(queue)
    admitted: list[Candidate] = []
    for candidate in candidates:
        if len(admitted) == want:
            break
        if queue_limit and counts[qkey] >= queue_limit:
            break
        key = candidate.concurrency_key
        if key and counts[key] >= candidate.concurrency_limit:
            continue
        if key:
            counts[key] += 1
        counts[qkey] += 1
        admitted.append(candidate)
    return admitted


def rate_demand(admitted: Iterable[Candidate]) -> dict[str, int]:
    """How many grants each rate-limited tier is asked for, by tier (sorted)."""
    demand = Counter(c.rate_key for c in admitted if c.rate_key)
    return {key: demand[key] for key in sorted(demand)}


def within_rate(admitted: Sequence[Candidate], granted: Mapping[str, int]) -> list[Candidate]:
    """The admitted candidates the rate limits allow: per tier, the first ``granted``."""
    left = dict(granted)
    kept = []
    for candidate in admitted:
        if candidate.rate_key:
            if left.get(candidate.rate_key, 0) <= 0:
                continue
            left[candidate.rate_key] -= 1
        kept.append(candidate)
    return kept


class HoldReason(StrEnum):
    READY = "ready"
    NOT_DUE = "not_due"
    QUEUE_PAUSED = "queue_paused"
    CONCURRENCY_KEY_FULL = "concurrency_key_full"
    QUEUE_FULL = "queue_full"
    RATE_LIMITED = "rate_limited"
    NO_WORKER_FOR_VERSION = "no_worker_for_version"


@dataclass(frozen=True)
class Hold:
    """Why a waiting job is not running."""

    reason: HoldReason
    key: str = ""
    until: datetime | None = None
    detail: str = ""


@dataclass(frozen=True)
class WaitingFacts:
    """What explaining one waiting job needs, read in one go."""

    queue: str
    definition: str  # job_type@version
    next_run_at: datetime | None
    now: datetime
    paused: bool
    concurrency_key: str | None
    concurrency_limit: int
    key_running: int
    queue_limit: int
    queue_running: int
    rate_key: str | None
    rate_blocked_until: datetime | None
    rate_spent: bool
    live_definitions: frozenset[str] | None  # None: no worker has said what it runs


def explain(facts: WaitingFacts) -> Hold:
    """The first reason, in the order a claim checks them, that keeps the job waiting."""
    if facts.next_run_at is not None and facts.next_run_at > facts.now:
        return Hold(HoldReason.NOT_DUE, until=facts.next_run_at, detail="waits for its time")
    if facts.paused:
        return Hold(HoldReason.QUEUE_PAUSED, facts.queue, detail=f"queue {facts.queue} is paused")
    if facts.live_definitions is not None and facts.definition not in facts.live_definitions:
        return Hold(
            HoldReason.NO_WORKER_FOR_VERSION,
            facts.definition,
            detail=f"no live worker runs {facts.definition}",
        )
    key = facts.concurrency_key
    if key and facts.key_running >= facts.concurrency_limit:
        return Hold(
            HoldReason.CONCURRENCY_KEY_FULL,
            key,
            detail=f"concurrency key {key} runs {facts.key_running} of {facts.concurrency_limit}",
        )
    if facts.queue_limit and facts.queue_running >= facts.queue_limit:
        return Hold(
            HoldReason.QUEUE_FULL,
            facts.queue,
            detail=f"queue {facts.queue} runs {facts.queue_running} of {facts.queue_limit}",
        )
    if facts.rate_key and (facts.rate_spent or _after(facts.rate_blocked_until, facts.now)):
        return Hold(
            HoldReason.RATE_LIMITED,
            facts.rate_key,
            until=facts.rate_blocked_until if _after(facts.rate_blocked_until, facts.now) else None,
            detail=f"the rate limit of tier {facts.rate_key} is spent",
        )
    return Hold(HoldReason.READY, detail="eligible: next in line when a worker asks")


def _after(moment: datetime | None, now: datetime) -> bool:
    return moment is not None and moment > now


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


def parse_limits(text: str) -> dict[str, int]:
    """``queue=limit`` pairs, comma-separated (JOBS_QUEUE_CONCURRENCY)."""
    limits: dict[str, int] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"expected queue=limit with a limit of at least 1, got {pair!r}")
        limits[name.strip()] = int(value)
    return limits


@dataclass(frozen=True)
class QueueState:
    name: str
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    waiting: int
    eligible: int
    running: int
    concurrency_limit: int


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
