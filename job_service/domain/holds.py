"""Why a waiting job is held back: the first reason, in the order a claim checks them
(``claims.py``), read from the facts the queues adapter gathers for one job."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from shared.errors import ErrorCode


class HoldReason(StrEnum):
    READY = "ready"
    NOT_DUE = "not_due"
    QUEUE_PAUSED = "queue_paused"
    CONCURRENCY_KEY_FULL = "concurrency_key_full"
    QUEUE_FULL = "queue_full"
    RATE_LIMITED = "rate_limited"
    NO_WORKER_FOR_VERSION = "no_worker_for_version"
    WAITING_FOR_DEPENDENCIES = "waiting_for_dependencies"
    # not due: its code sleeps (ctx.sleep) or waits for a signal (ctx.wait_for_signal)
    SLEEPING = "sleeping"
    WAITING_FOR_SIGNAL = "waiting_for_signal"


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
    # the code of the attempt that ended last (SUSPENDED_*: the job sleeps or waits)
    error_code: str | None = None


def explain(facts: WaitingFacts) -> Hold:
    """The first reason, in the order a claim checks them, that keeps the job waiting."""
    if facts.next_run_at is not None and facts.next_run_at > facts.now:
        return _not_due(facts.next_run_at, facts.error_code)
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


def _not_due(until: datetime, code: str | None) -> Hold:
    if code == ErrorCode.SUSPENDED_SLEEP:
        return Hold(HoldReason.SLEEPING, until=until, detail="its code sleeps until then")
    if code == ErrorCode.SUSPENDED_SIGNAL:
        return Hold(
            HoldReason.WAITING_FOR_SIGNAL,
            until=until,
            detail="its code waits for a signal (SendSignal wakes it), or until then",
        )
    return Hold(HoldReason.NOT_DUE, until=until, detail="waits for its time")


def _after(moment: datetime | None, now: datetime) -> bool:
    return moment is not None and moment > now
