"""The retry policy (DESIGN §7): the error class and the definition decide, in one place."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job_service.domain.lifecycle import JobStatus
from job_service.domain.retry import Outcome, RetryDecision, RetryPolicy
from jobtypes import synthetic
from shared.registry import AbortStrategy

MAX_ATTEMPTS = 5


def policy(*, retry_on_timeout: bool = False, max_attempts: int = MAX_ATTEMPTS) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max_attempts, base_s=1.0, max_s=30.0, retry_on_timeout=retry_on_timeout
    )


# DESIGN §7, plus the engine's own classes (JOB_*, LEASE_*, WORKER_SHUTDOWN).
RETRIED_WITH_BACKOFF = [
    "PROVIDER_TIMEOUT",
    "PROVIDER_UNAVAILABLE",
    "PROVIDER_RATE_LIMITED",
    "PROVIDER_HTTP_503",  # a code a job type adds: the prefix decides
    "VALIDATION_OUTPUT_SCHEMA",
    "VALIDATION_CARD_TOO_LONG",
    "LEASE_EXPIRED",
]
NEVER_RETRIED = [
    "CONTENT_SAFETY_BLOCKED",
    "CONTENT_SAFETY_PII",
    "CREDENTIAL_INVALID",
    "CREDENTIAL_MISSING",
    "JOB_REJECTED",
    "JOB_INPUT_UNWORKABLE",
]


@pytest.mark.parametrize("code", RETRIED_WITH_BACKOFF)
def test_retryable_classes_retry_with_a_backoff_delay(code: str) -> None:
    p = policy()
    decision = p.decide(1, code, rng=random.Random(7))
    assert decision.outcome is Outcome.RETRY
    assert decision.status is JobStatus.RETRYING
    assert decision.refund_attempt is False
    # Attempt 1: the step is base_s; jitter keeps the delay in [(1 - jitter) * base, base].
    assert (1 - p.jitter) * p.base_s <= decision.delay_s <= p.base_s
    assert decision.delay_s > 0


@pytest.mark.parametrize("code", RETRIED_WITH_BACKOFF)
def test_retryable_classes_are_retried_up_to_the_last_attempt(code: str) -> None:
    p = policy()
    for attempt in range(1, MAX_ATTEMPTS):
        assert p.decide(attempt, code, rng=random.Random(attempt)).outcome is Outcome.RETRY
    assert p.decide(MAX_ATTEMPTS, code).outcome is Outcome.FAIL


@pytest.mark.parametrize("code", NEVER_RETRIED)
@pytest.mark.parametrize("attempt", [1, 2, MAX_ATTEMPTS])
def test_non_retryable_classes_fail_at_once(code: str, attempt: int) -> None:
    decision = policy(retry_on_timeout=True).decide(attempt, code)
    assert decision == RetryDecision(Outcome.FAIL)
    assert decision.status is JobStatus.FAILED


@pytest.mark.parametrize("code", ["TIMEOUT", "TIMEOUT_HARD"])
def test_timeout_follows_the_abort_strategy(code: str) -> None:
    assert policy(retry_on_timeout=False).decide(1, code).outcome is Outcome.FAIL
    retried = policy(retry_on_timeout=True).decide(1, code, rng=random.Random(1))
    assert retried.outcome is Outcome.RETRY
    assert retried.delay_s > 0
    # Even with abort strategy "retry", the attempts run out.
    assert policy(retry_on_timeout=True).decide(MAX_ATTEMPTS, code).outcome is Outcome.FAIL


def test_abort_strategy_of_the_definition_sets_retry_on_timeout() -> None:
    fail = RetryPolicy.of(synthetic.DEFINITION)
    assert synthetic.DEFINITION.abort_strategy is AbortStrategy.FAIL
    assert fail.retry_on_timeout is False
    assert fail.decide(1, "TIMEOUT").outcome is Outcome.FAIL

    retrying = dataclasses.replace(synthetic.DEFINITION, abort_strategy=AbortStrategy.RETRY)
    assert RetryPolicy.of(retrying).decide(1, "TIMEOUT").outcome is Outcome.RETRY


def test_policy_of_a_definition_copies_its_limits() -> None:
    p = RetryPolicy.of(synthetic.DEFINITION)
    assert p.max_attempts == synthetic.DEFINITION.max_attempts == 4
    assert p.base_s == synthetic.DEFINITION.backoff_base_s
    assert p.max_s == synthetic.DEFINITION.backoff_max_s


@pytest.mark.parametrize("code", ["CANCELLED", "CANCELLED_BY_PARENT"])
@pytest.mark.parametrize("attempt", [1, MAX_ATTEMPTS, MAX_ATTEMPTS + 1])
def test_cancelled_ends_cancelled_whatever_the_attempt(code: str, attempt: int) -> None:
    decision = policy().decide(attempt, code)
    assert decision == RetryDecision(Outcome.CANCEL)
    assert decision.status is JobStatus.CANCELLED


@pytest.mark.parametrize("code", ["INTERNAL_ERROR", "INTERNAL_BUG"])
def test_internal_errors_are_retried_once(code: str) -> None:
    p = policy()
    assert p.decide(1, code, rng=random.Random(3)).outcome is Outcome.RETRY
    for attempt in range(2, MAX_ATTEMPTS + 1):
        assert p.decide(attempt, code).outcome is Outcome.FAIL
    # "Once" never exceeds the definition's attempts.
    assert policy(max_attempts=1).decide(1, code).outcome is Outcome.FAIL


@pytest.mark.parametrize("code", ["", "SOMETHING_ELSE", "provider_timeout", "PROVIDERX"])
def test_unknown_codes_count_as_internal(code: str) -> None:
    p = policy()
    assert p.decide(1, code, rng=random.Random(3)).outcome is Outcome.RETRY
    assert p.decide(2, code).outcome is Outcome.FAIL


@pytest.mark.parametrize("attempt", [1, MAX_ATTEMPTS, MAX_ATTEMPTS + 3])
def test_worker_shutdown_is_retried_at_once_and_refunds_the_attempt(attempt: int) -> None:
    decision = policy().decide(attempt, "WORKER_SHUTDOWN")
    assert decision == RetryDecision(Outcome.RETRY, delay_s=0.0, refund_attempt=True)
    assert decision.status is JobStatus.RETRYING


def test_only_worker_shutdown_refunds() -> None:
    for code in [*RETRIED_WITH_BACKOFF, *NEVER_RETRIED, "TIMEOUT", "CANCELLED", "INTERNAL_X"]:
        assert policy(retry_on_timeout=True).decide(1, code).refund_attempt is False, code


@settings(database=None, max_examples=300)
@given(
    code=st.sampled_from([*RETRIED_WITH_BACKOFF, "TIMEOUT"]),
    max_attempts=st.integers(1, 12),
    attempt=st.integers(1, 20),
    seed=st.integers(0, 2**32),
)
def test_exhausting_max_attempts_fails(
    code: str, max_attempts: int, attempt: int, seed: int
) -> None:
    p = policy(retry_on_timeout=True, max_attempts=max_attempts)
    decision = p.decide(attempt, code, rng=random.Random(seed))
    if attempt >= max_attempts:
        assert decision.outcome is Outcome.FAIL
        assert decision.delay_s == 0
    else:
        assert decision.outcome is Outcome.RETRY
        assert 0 < decision.delay_s <= p.max_s


# --- backoff ---------------------------------------------------------------------------


def test_backoff_without_jitter_doubles_until_the_cap() -> None:
    p = RetryPolicy(max_attempts=20, base_s=0.5, max_s=10.0, retry_on_timeout=False, jitter=0)
    delays = [p.backoff(attempt) for attempt in range(1, 9)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_decide_uses_the_backoff_of_the_failed_attempt() -> None:
    p = RetryPolicy(max_attempts=20, base_s=0.5, max_s=10.0, retry_on_timeout=False, jitter=0)
    assert [p.decide(n, "PROVIDER_TIMEOUT").delay_s for n in (1, 2, 3, 4)] == [0.5, 1, 2, 4]


@settings(database=None, max_examples=500)
@given(
    base_s=st.floats(0.01, 10),
    factor=st.floats(1, 1000),
    jitter=st.floats(0, 1),
    attempt=st.integers(1, 200),
    seed=st.integers(0, 2**32),
)
def test_backoff_stays_within_the_jittered_exponential_step(
    base_s: float, factor: float, jitter: float, attempt: int, seed: int
) -> None:
    max_s = base_s * factor
    p = RetryPolicy(
        max_attempts=1000, base_s=base_s, max_s=max_s, retry_on_timeout=False, jitter=jitter
    )
    step = min(max_s, base_s * 2.0 ** min(attempt - 1, 1000))
    delay = p.backoff(attempt, random.Random(seed))
    assert (1 - jitter) * step * (1 - 1e-12) <= delay <= step * (1 + 1e-12)
    assert delay <= max_s * (1 + 1e-12)
    # The same seed draws the same delay: decisions can be replayed in tests.
    assert p.backoff(attempt, random.Random(seed)) == delay


@settings(database=None, max_examples=200)
@given(attempt=st.integers(1, 30), seed=st.integers(0, 2**32))
def test_backoff_grows_exponentially_below_the_cap(attempt: int, seed: int) -> None:
    # With jitter 0.25, the next step's minimum (0.75 * 2s) exceeds this step's maximum (s).
    p = RetryPolicy(max_attempts=100, base_s=0.001, max_s=1e12, retry_on_timeout=False)
    this = p.backoff(attempt, random.Random(seed))
    following = p.backoff(attempt + 1, random.Random(seed + 1))
    assert following > this
    assert following >= 0.75 * 0.001 * 2**attempt


def test_backoff_without_an_rng_is_still_bounded() -> None:
    p = RetryPolicy(max_attempts=10, base_s=2.0, max_s=60.0, retry_on_timeout=False)
    for attempt in range(1, 10):
        step = min(60.0, 2.0 * 2 ** (attempt - 1))
        assert 0.75 * step <= p.backoff(attempt) <= step


def test_backoff_does_not_overflow_for_large_attempt_numbers() -> None:
    # The registry puts no upper bound on max_attempts; a job on its 1100th attempt must
    # still get a (capped) delay, not an OverflowError from base_s * 2 ** 1099.
    p = RetryPolicy(max_attempts=5000, base_s=0.5, max_s=60.0, retry_on_timeout=False, jitter=0)
    assert p.backoff(1100) == 60.0
    assert p.decide(1100, "PROVIDER_TIMEOUT").delay_s == 60.0


# --- seed 000 §5.2 against seed 001 §5.2 ----------------------------------------------


@pytest.mark.parametrize("attempt", [1, 2, MAX_ATTEMPTS - 1])
def test_a_provider_request_rejected_is_not_retried(attempt: int) -> None:
    """A 4xx other than 401/403/408/429: the same request would be refused again."""
    assert policy().decide(attempt, "PROVIDER_REQUEST_REJECTED").outcome is Outcome.FAIL
    # while the other provider errors still are
    assert policy().decide(attempt, "PROVIDER_UNAVAILABLE").outcome is Outcome.RETRY


def test_a_p0_rejection_of_the_answer_is_retried_until_the_attempts_are_spent() -> None:
    """Seed 001's P0 card rules say "reject, job failed"; seed 000 retries VALIDATION_*.
    The engine retries (with a repair instruction) and fails the job at the last attempt."""
    decisions = [
        policy().decide(attempt, "VALIDATION_OUTPUT_REJECTED").outcome
        for attempt in range(1, MAX_ATTEMPTS + 1)
    ]
    assert decisions == [Outcome.RETRY] * (MAX_ATTEMPTS - 1) + [Outcome.FAIL]
