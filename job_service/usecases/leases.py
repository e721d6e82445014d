"""ExecutorService's use cases on a lease (the scheduler grants it): heartbeat, end a
failed attempt as the retry policy decides, and reap the leases whose worker went silent.

A lease is a token the database hands out with LockJobs; every later call of the worker
names it, and the store refuses a stale one (LeaseLost) without changing anything. Expiry
is judged by the database clock, never by this process's.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TypeVar

from job_service import metrics
from job_service.domain.models import (
    AttemptFacts,
    FailureOutcome,
    HeartbeatAck,
)
from job_service.domain.retry import Outcome, RetryDecision, RetryPolicy
from job_service.ports.leases import Decide, LeaseStore
from job_service.ports.outbox import Waker
from job_service.usecases.checks import require_batch, require_uuid
from shared.ai.provider import UsageRecord
from shared.errors import ErrorClass, ErrorCode, FieldViolation, InvalidInput, LeaseLost, classify
from shared.registry import Registry

T = TypeVar("T")

# The class prefix decides retries (shared.errors.classify); the column holds 100 characters.
ERROR_CODE_PATTERN = re.compile(r"[A-Z][A-Z0-9_]{0,99}")
MAX_ERROR_MESSAGE_CHARS = 4000
REAP_BATCH = 100
# Wake the dispatcher just after a retry becomes due, not just before.
WAKE_MARGIN_S = 0.01
# A provider's Retry-After delays a retry by at most this much.
MAX_RETRY_AFTER_S = 600.0


class Leases:
    def __init__(self, registry: Registry, store: LeaseStore, outbox: Waker) -> None:
        self._store = store
        self._outbox = outbox
        self._policies = {d.job_type: RetryPolicy.of(d) for d in registry}

    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck:
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        return await _counting_stale(
            "Heartbeat", self._store.heartbeat(job_id, lease_token, progress)
        )

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        usage: Sequence[UsageRecord] = (),
        retry_after_s: float = 0.0,
    ) -> FailureOutcome:
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        if not ERROR_CODE_PATTERN.fullmatch(error_code):
            raise InvalidInput(
                "error_code is malformed",
                [FieldViolation("error_code", "an upper-case code such as PROVIDER_TIMEOUT")],
            )
        return await _counting_stale(
            "SubmitFailure",
            self.end_attempt(
                job_id,
                lease_token,
                error_code,
                # operator detail: kept even when odd, but never a NUL (text columns refuse it)
                error_message.replace("\x00", "\ufffd"),
                usage,
                self._deciding_no_sooner_than(retry_after_s),
            ),
        )

    async def end_attempt(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        usage: Sequence[UsageRecord] = (),
        decide: Decide | None = None,
    ) -> FailureOutcome:
        """Ends the attempt the lease names as the retry policy decides (LeaseLost when
        the lease is not current) and wakes the dispatcher for what that wrote."""
        outcome = await self._store.end_attempt(
            job_id,
            lease_token,
            error_code,
            error_message[:MAX_ERROR_MESSAGE_CHARS],
            decide or self.decide,
            usage,
        )
        self._wake_for(outcome)
        return outcome

    def _deciding_no_sooner_than(self, retry_after_s: float) -> Decide:
        """``decide``, with a retry scheduled no sooner than a provider's Retry-After."""
        floor = min(max(0.0, retry_after_s), MAX_RETRY_AFTER_S)
        if floor <= 0:
            return self.decide

        def decide(facts: AttemptFacts, code: str) -> RetryDecision:
            decision = self.decide(facts, code)
            if decision.outcome is Outcome.RETRY and decision.delay_s < floor:
                return replace(decision, delay_s=floor)
            return decision

        return decide

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord]
    ) -> tuple[int, int]:
        """Records provider calls of an attempt, held or not (usage is a fact, not a
        result): (the attempt number, rows stored); calls stored already are skipped."""
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        require_batch("usage", usage)
        if any(not u.call_id for u in usage):
            raise InvalidInput(
                "every usage record needs its call_id",
                [FieldViolation("usage.call_id", "the worker's id of the call, e.g. a uuid")],
            )
        attempt, stored = await _counting_stale(
            "ReportUsage", self._store.report_usage(job_id, lease_token, usage)
        )
        metrics.usage_reported_late(stored)
        return attempt, stored

    async def reap_expired_leases(self) -> int:
        """The reaper's round: attempts whose lease ran out end as LEASE_EXPIRED."""
        outcomes = await self._store.reap_expired_leases(REAP_BATCH, self.decide)
        for outcome in outcomes:
            self._wake_for(outcome)
        return len(outcomes)

    def decide(self, facts: AttemptFacts, code: str) -> RetryDecision:
        """The retry decision for a failed attempt of a RUNNING job. A worker that
        reports CANCELLED although no cancel was asked for is treated as an internal
        error: only CancelJob ends a job cancelled."""
        if classify(code) is ErrorClass.CANCELLED:
            code = ErrorCode.INTERNAL_ERROR
        policy = replace(self._policies[facts.job_type], max_attempts=facts.max_attempts)
        return policy.decide(facts.attempt, code)

    def wake_for(self, outcomes: Sequence[FailureOutcome]) -> None:
        """Wakes the dispatcher for attempts ended elsewhere (a worker's disconnect)."""
        for outcome in outcomes:
            self._wake_for(outcome)

    def _wake_for(self, outcome: FailureOutcome) -> None:
        """A retry's dispatch row is due at next_run_at; a terminal status wrote a domain
        event that is due now. (Only a hint: the database clock decides what is due.)"""
        if outcome.next_run_at is not None:
            delay = (outcome.next_run_at - datetime.now(UTC)).total_seconds()
            self._outbox.wake(after_s=max(0.0, delay) + WAKE_MARGIN_S)
        else:
            self._outbox.wake()


async def _counting_stale(rpc: str, call: Awaitable[T]) -> T:
    try:
        return await call
    except LeaseLost:
        metrics.stale_submit(rpc)
        raise
