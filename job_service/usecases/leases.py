"""ExecutorService's use cases on a lease (the scheduler grants it): heartbeat, end a
failed attempt as the retry policy decides (a pending cancel wins: domain/attempts.py),
and reap the leases whose worker went silent.

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
from job_service.domain.attempts import (
    AttemptFacts,
    Decide,
    FailureOutcome,
    HeartbeatAck,
    LeaseState,
    LockedAttempt,
    abandoned_code,
    always_cancel,
    attempt_end,
    repeated_failure,
)
from job_service.domain.checks import require_batch, require_uuid
from job_service.domain.declared_types import JobTypes
from job_service.domain.envelopes import INTERNAL_ERROR
from job_service.domain.retry import Outcome, RetryDecision, RetryPolicy
from job_service.ports.leases import AttemptEnding, LeaseStore
from job_service.ports.outbox import Waker
from job_service.usecases.rate_limits import RateReservations
from job_service.usecases.sealing import Sealer
from shared.ai.provider import UsageRecord
from shared.durable_steps import MAX_SUSPENSION_S
from shared.errors import ErrorClass, ErrorCode, FieldViolation, InvalidInput, LeaseLost, classify

T = TypeVar("T")

# The class prefix decides retries (shared.errors.classify); the column holds 100 characters.
ERROR_CODE_PATTERN = re.compile(r"[A-Z][A-Z0-9_]{0,99}")
MAX_ERROR_MESSAGE_CHARS = 4000
REAP_BATCH = 100
# Wake the dispatcher just after a retry becomes due, not just before.
WAKE_MARGIN_S = 0.01
# The operator's detail of an attempt the reaper ended, by its code.
REAPED_BECAUSE = {
    ErrorCode.LEASE_EXPIRED: "lease expired",
    ErrorCode.TIMEOUT: "ran past its timeout and the grace; ended by the job service",
}
# A provider's Retry-After delays a retry by at most this much.
MAX_RETRY_AFTER_S = 600.0
# A retry due later than this gets no dispatcher timer of this replica (a sleep of days
# would hold one for days): the dispatcher's poll finds it.
WAKE_TIMER_HORIZON_S = 600.0


class Leases:
    def __init__(
        self,
        registry: JobTypes,
        store: LeaseStore,
        outbox: Waker,
        reservations: RateReservations,
        sealer: Sealer | None = None,
    ) -> None:
        """``sealer`` seals each ended attempt's internal error message (the detail an
        admin reads: exception text may quote content) under the job's user's key."""
        self._sealer = sealer or Sealer(None, None)
        self._store = store
        self._outbox = outbox
        self._reservations = reservations
        self._types = registry

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
        signals_seen: int = 0,
    ) -> FailureOutcome:
        """``retry_after_s``: no retry sooner (a provider's Retry-After; a suspension's wake
        time). ``signals_seen``: with SUSPENDED_SIGNAL, the newest signal seq the attempt
        had seen (a newer one makes the job due at once)."""
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        if not ERROR_CODE_PATTERN.fullmatch(error_code):
            raise InvalidInput(
                "error_code is malformed",
                [FieldViolation("error_code", "an upper-case code such as PROVIDER_TIMEOUT")],
            )
        outcome = await _counting_stale(
            "SubmitFailure",
            self.end_attempt(
                job_id,
                lease_token,
                error_code,
                # operator detail: kept even when odd, but never a NUL (text columns refuse it)
                error_message.replace("\x00", "\ufffd"),
                usage,
                self._deciding_no_sooner_than(retry_after_s, error_code, signals_seen),
            ),
        )
        await self._reservations.attempts_ended([(job_id, usage)])
        return outcome

    async def end_attempt(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        usage: Sequence[UsageRecord] = (),
        decide: Decide | None = None,
    ) -> FailureOutcome:
        """Ends the attempt the lease names as ``decide`` (the retry policy) says, storing
        its usage with it, and wakes the dispatcher for what that wrote. A repeat of a
        report is answered with the status it led to (and stores nothing); otherwise a
        lease that is not current is LeaseLost."""
        async with self._store.ending() as tx:
            attempt = await tx.attempt(job_id, lease_token)
            if attempt is None:  # not leased: a repeat of this report, or a lost lease
                status = repeated_failure(await tx.lease_state(job_id), lease_token)
                if status is None:
                    raise LeaseLost("the lease on this job is no longer held")
                outcome = FailureOutcome(status)
            else:
                if usage:
                    await tx.store_usage(attempt, usage)
                outcome = await self._end(
                    tx,
                    attempt,
                    error_code,
                    error_message[:MAX_ERROR_MESSAGE_CHARS],
                    decide or self.decide,
                )
        self._wake_for(outcome)
        return outcome

    async def confirm_cancel(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord] = ()
    ) -> FailureOutcome:
        """Ends the attempt of a job whose cancel won the race with its result; the result
        is dropped, the provider calls it made (``usage``) are stored all the same."""
        return await self.end_attempt(
            job_id, lease_token, ErrorCode.CANCELLED, "", usage, always_cancel
        )

    async def lease_state(self, job_id: str) -> LeaseState | None:
        """Where the job stands, for a report the store refused."""
        return await self._store.lease_state(job_id)

    def _deciding_no_sooner_than(
        self, retry_after_s: float, code: str, signals_seen: int
    ) -> Decide:
        """``decide``, with a retry scheduled no sooner than a provider's Retry-After (or
        a suspension's wake time), and a signal wait's end woken by a newer signal."""
        cap = MAX_SUSPENSION_S if classify(code) is ErrorClass.SUSPENDED else MAX_RETRY_AFTER_S
        floor = min(max(0.0, retry_after_s), cap)
        waits = code == ErrorCode.SUSPENDED_SIGNAL
        if floor <= 0 and not waits:
            return self.decide

        def decide(facts: AttemptFacts, code: str) -> RetryDecision:
            decision = self.decide(facts, code)
            if decision.outcome is not Outcome.RETRY:
                return decision
            if waits:
                decision = replace(decision, wake_after_signal=max(0, signals_seen))
            return replace(decision, delay_s=max(decision.delay_s, floor))

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
        """The reaper's round: attempts whose lease ran out end as LEASE_EXPIRED, or as
        TIMEOUT when they reached their deadline (their timeout plus the grace, where a
        lease stops however it is heartbeaten); a pending cancel ends cancelled."""
        async with self._store.ending() as tx:
            outcomes = []
            for attempt in await tx.expired(REAP_BATCH):
                code = abandoned_code(attempt)
                outcomes += await self.end_abandoned(tx, [attempt], code, REAPED_BECAUSE[code])
        self.wake_for(outcomes)
        return len(outcomes)

    async def end_abandoned(
        self, tx: AttemptEnding, attempts: Sequence[LockedAttempt], code: str, message: str
    ) -> list[FailureOutcome]:
        """Ends, in ``tx``, attempts their worker abandoned (its lease ran out, or it
        disconnected) as the retry policy decides for ``code``; an AI job's attempt is
        marked as having unknown usage (its worker reported none) until a late
        ReportUsage. The caller wakes the dispatcher once ``tx`` has committed."""
        return [await self._end(tx, a, code, message, self.decide, reaped=True) for a in attempts]

    def decide(self, facts: AttemptFacts, code: str) -> RetryDecision:
        """The retry decision for a failed attempt of a RUNNING job. A worker that
        reports CANCELLED although no cancel was asked for is treated as an internal
        error: only CancelJob ends a job cancelled."""
        if classify(code) is ErrorClass.CANCELLED:
            code = ErrorCode.INTERNAL_ERROR
        policies = self._types.derived(
            "retry_policies", lambda types: {d.job_type: RetryPolicy.of(d) for d in types}
        )
        policy = replace(policies[facts.job_type], max_attempts=facts.max_attempts)
        return policy.decide(facts.attempt, code)

    def wake_for(self, outcomes: Sequence[FailureOutcome]) -> None:
        """Wakes the dispatcher for ended attempts, once their transaction committed."""
        for outcome in outcomes:
            self._wake_for(outcome)

    async def _end(
        self,
        tx: AttemptEnding,
        attempt: LockedAttempt,
        code: str,
        message: str,
        decide: Decide,
        *,
        reaped: bool = False,
    ) -> FailureOutcome:
        end = attempt_end(attempt.facts, code, decide)
        if message and attempt.user_id:
            job_id = attempt.facts.job_id
            message = await self._sealer.seal_text(attempt.user_id, job_id, INTERNAL_ERROR, message)
        ended = await tx.end(attempt, end, message, reaped=reaped)
        metrics.attempt_ended(attempt.facts.job_type, end.code, ended.status)
        if ended.usage_unknown:
            metrics.usage_unknown(attempt.facts.job_type)
        return FailureOutcome(ended.status, ended.next_run_at)

    def _wake_for(self, outcome: FailureOutcome) -> None:
        """A retry's dispatch row is due at next_run_at; a terminal status wrote a domain
        event that is due now. (Only a hint: the database clock decides what is due, and
        the dispatcher's poll finds a row due past the timers' horizon, a long sleep's.)"""
        if outcome.next_run_at is not None:
            delay = (outcome.next_run_at - datetime.now(UTC)).total_seconds()
            if delay <= WAKE_TIMER_HORIZON_S:
                self._outbox.wake(after_s=max(0.0, delay) + WAKE_MARGIN_S)
        else:
            self._outbox.wake()


async def _counting_stale(rpc: str, call: Awaitable[T]) -> T:
    try:
        return await call
    except LeaseLost:
        metrics.stale_submit(rpc)
        raise
