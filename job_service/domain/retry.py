"""What happens after a failed attempt: retry (and when), fail, or cancel.

The job service decides, never the transport: a failure comes in with an error code, the
class of that code (``shared.errors.classify``) and the job's definition decide, and the
decision is a value the leases adapter applies with one compare-and-set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

from job_service.domain.job_types import JobType
from job_service.domain.lifecycle import JobStatus
from shared.definitions import AbortStrategy
from shared.errors import ErrorClass, ErrorCode, classify

# Codes never retried whatever their class says: a provider's 4xx other than 401, 403,
# 408 and 429 refuses the request itself, and the same request is refused again (seed 000
# §5.2 lists provider timeouts, 5xx and rate limits as the retried PROVIDER_* errors).
NEVER_RETRIED = frozenset({ErrorCode.PROVIDER_REQUEST_REJECTED.value})


class Outcome(StrEnum):
    RETRY = "retry"
    FAIL = "fail"
    CANCEL = "cancel"


@dataclass(frozen=True)
class RetryDecision:
    outcome: Outcome
    # Seconds until the next attempt may start (RETRY only).
    delay_s: float = 0.0
    # The failed attempt is handed back, not spent (a draining worker, a suspension).
    refund_attempt: bool = False
    # A signal wait (SUSPENDED_SIGNAL): the newest signal seq the attempt had seen; a job
    # holding a newer one when the attempt ends is due at once instead of after delay_s.
    wake_after_signal: int | None = None

    @property
    def status(self) -> JobStatus:
        return {
            Outcome.RETRY: JobStatus.RETRYING,
            Outcome.FAIL: JobStatus.FAILED,
            Outcome.CANCEL: JobStatus.CANCELLED,
        }[self.outcome]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    base_s: float
    max_s: float
    retry_on_timeout: bool
    # Each delay is drawn from [1 - jitter, 1] times the exponential step.
    jitter: float = 0.25

    @classmethod
    def of(cls, definition: JobType) -> RetryPolicy:
        return cls(
            max_attempts=definition.max_attempts,
            base_s=definition.backoff_base_s,
            max_s=definition.backoff_max_s,
            retry_on_timeout=definition.abort_strategy is AbortStrategy.RETRY,
        )

    def decide(self, attempt: int, code: str, *, rng: random.Random | None = None) -> RetryDecision:
        """The decision after attempt number ``attempt`` (1-based) failed with ``code``."""
        error_class = classify(code)
        if error_class is ErrorClass.CANCELLED:
            return RetryDecision(Outcome.CANCEL)
        if error_class in (ErrorClass.WORKER_SHUTDOWN, ErrorClass.SUSPENDED):
            # a sleep's wake time comes as the report's retry_after (leases.py)
            return RetryDecision(Outcome.RETRY, refund_attempt=True)
        if (
            code in NEVER_RETRIED
            or not self._retryable(error_class, attempt)
            or attempt >= self.max_attempts
        ):
            return RetryDecision(Outcome.FAIL)
        return RetryDecision(Outcome.RETRY, delay_s=self.backoff(attempt, rng))

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        # the exponent is clamped: past 2**32 the cap has long been reached anyway
        step = min(self.max_s, self.base_s * 2.0 ** min(attempt - 1, 32))
        return step * (1 - self.jitter * (rng or random).random())

    def _retryable(self, error_class: ErrorClass, attempt: int) -> bool:
        match error_class:
            case ErrorClass.PROVIDER | ErrorClass.VALIDATION | ErrorClass.LEASE:
                return True
            case ErrorClass.TIMEOUT:
                return self.retry_on_timeout
            case ErrorClass.INTERNAL:
                return attempt == 1  # once
            case _:
                return False
