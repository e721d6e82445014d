"""How an attempt ends: the status a failed, cancelled or abandoned attempt leads to, and
what a worker's report means when the store refused it (its lease was not current).

Pure: no I/O. The leases and results use cases decide with these; the leases store writes
what they decided with one compare-and-set on the attempt's locked row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from job_service.domain.lifecycle import LEASED, JobStatus, Step, transition
from job_service.domain.retry import Outcome, RetryDecision
from shared.ai.provider import UsageRecord
from shared.errors import ErrorCode, public_message
from shared.execution import ArtifactDraft, ChildJobDraft


class Decide(Protocol):
    """The retry decision for a failed attempt of a RUNNING job."""

    def __call__(self, facts: AttemptFacts, code: str) -> RetryDecision: ...


# An attempt is ended as a TIMEOUT this long after its definition's timeout, whatever its
# heartbeats say: the worker enforces the timeout itself and reports it; the grace covers
# that report, so only a hung attempt reaches the deadline. The grace is proportional to
# the timeout (issue 43: a 5 s timeout is not left running 30 s more), at most
# JOBS_ATTEMPT_TIMEOUT_GRACE_S: with the reaper's interval (1 s) an attempt ends at most
# min(timeout, 30 s) past its timeout, for timeouts of 2 s and more.
DEFAULT_TIMEOUT_GRACE_S = 25.0
TIMEOUT_GRACE_FRACTION = 0.25


def timeout_grace_s(timeout_s: float, most_s: float = DEFAULT_TIMEOUT_GRACE_S) -> float:
    """How long past ``timeout_s`` an attempt may run before the job service ends it."""
    return min(most_s, timeout_s * TIMEOUT_GRACE_FRACTION)


@dataclass(frozen=True)
class LockedAttempt:
    """An attempt whose job row its transaction holds locked: what a decision needs, and
    the lease token that fences the write of its end. ``past_deadline``: it has run past
    its timeout plus the grace."""

    facts: AttemptFacts
    lease_token: str
    past_deadline: bool = False
    # the job's owner: whose data key seals the attempt's internal error message
    user_id: str = ""


def abandoned_code(attempt: LockedAttempt) -> ErrorCode:
    """Why the reaper ends an attempt whose lease lapsed: it ran past its deadline (a
    TIMEOUT, which the definition's abort strategy retries or not), or its worker went
    silent."""
    return ErrorCode.TIMEOUT if attempt.past_deadline else ErrorCode.LEASE_EXPIRED


@dataclass(frozen=True)
class AttemptEnd:
    """How an attempt ends, as decided: the status its job moves to, the error code
    recorded and, for a retry, its delay and whether the attempt is handed back."""

    status: JobStatus
    code: str
    delay_s: float = 0.0
    refund_attempt: bool = False
    # due at once when the job holds a signal newer than this (a signal wait's end)
    wake_after_signal: int | None = None

    @property
    def public_message(self) -> str:
        return public_message(self.code)


@dataclass(frozen=True)
class EndedAttempt:
    """An attempt's end as written: the status and, for a retry, when the next attempt is
    due; ``usage_unknown``: an abandoned attempt of an AI job whose worker reported no
    usage (a late ReportUsage clears the mark)."""

    status: JobStatus
    next_run_at: datetime | None = None
    usage_unknown: bool = False


@dataclass(frozen=True)
class LeaseState:
    """Where a job stands for a worker's late or repeated report."""

    status: JobStatus
    lease_token: str | None
    output_hash: str | None


class Refusal(StrEnum):
    """What a result the store did not commit means."""

    REPEAT = "repeat"  # the same result, committed already: answered SUCCEEDED again
    CANCEL_WON = "cancel_won"  # a cancel came first: the attempt ends CANCELLED
    LEASE_LOST = "lease_lost"  # another attempt holds the job, or it ended otherwise


_CANCEL = RetryDecision(Outcome.CANCEL)
_STEP = {Outcome.RETRY: Step.RETRY, Outcome.FAIL: Step.FAIL, Outcome.CANCEL: Step.CONFIRM_CANCEL}


def always_cancel(facts: AttemptFacts, code: str) -> RetryDecision:
    """The decision for an attempt whose cancel won the race with its result."""
    return _CANCEL


def attempt_end(facts: AttemptFacts, code: str, decide: Decide) -> AttemptEnd:
    """How the attempt ends after it failed with ``code``: a pending cancel wins whatever
    the failure (the job ends CANCELLED), else as ``decide`` says; the lifecycle's
    transition gives the status."""
    if facts.status is JobStatus.CANCEL_REQUESTED:
        decision, code = _CANCEL, ErrorCode.CANCELLED
    else:
        decision = decide(facts, code)
    return AttemptEnd(
        status=transition(facts.status, _STEP[decision.outcome]),
        code=code,
        delay_s=decision.delay_s,
        refund_attempt=decision.refund_attempt,
        wake_after_signal=decision.wake_after_signal,
    )


def repeated_failure(state: LeaseState | None, lease_token: str) -> JobStatus | None:
    """The status a failure report for an attempt that is no longer leased led to, when
    the report is a repeat (the attempt ``lease_token`` names ended otherwise than
    succeeding): answered again, nothing stored. None: the lease is lost."""
    if state is None or state.lease_token != lease_token:
        return None
    if state.status is JobStatus.SUCCEEDED or state.status in LEASED:
        return None
    return state.status


def refusal(state: LeaseState | None, lease_token: str, output_hash: str) -> Refusal:
    """Why a result with this lease token and output hash was not committed."""
    if state is None or state.lease_token != lease_token:
        return Refusal.LEASE_LOST
    if state.status is JobStatus.SUCCEEDED and state.output_hash == output_hash:
        return Refusal.REPEAT
    if state.status is JobStatus.CANCEL_REQUESTED:
        return Refusal.CANCEL_WON
    return Refusal.LEASE_LOST


@dataclass(frozen=True)
class HeartbeatAck:
    lease_expires_at: datetime
    cancel_requested: bool
    # the seq of the job's latest signal: a worker behind it fetches the rest
    latest_signal_seq: int = 0


@dataclass(frozen=True)
class AttemptFacts:
    """What a retry decision needs to know about the failed attempt."""

    job_id: str
    job_type: str
    status: JobStatus
    attempt: int
    # The budget the job was created with (a later definition change does not move it).
    max_attempts: int


@dataclass(frozen=True)
class FailureOutcome:
    status: JobStatus
    next_run_at: datetime | None = None


@dataclass(frozen=True)
class Submission:
    """One attempt's result, as its worker submits it."""

    job_id: str
    lease_token: str
    output: dict[str, Any]
    output_hash: str
    artifacts: Sequence[ArtifactDraft]
    children: Sequence[ChildJobDraft] = ()
    usage: Sequence[UsageRecord] = ()
