"""Rate-limit values: the time until a tier has budget, the settings' parsing, what a
replica remembers of the tiers between claims (``TierBudgets``), and a bucket's refill and
back-off at their edges (``tests/integration/test_rate_bucket_twin.py`` checks the SQL
against them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from job_service.domain.queues import parse_limits
from job_service.domain.rate_limits import (
    MIN_RATE_FACTOR,
    BucketLevel,
    RateLimit,
    TierBudgets,
    backed_off,
    elapsed_since,
    parse_rate_limits,
    recovered,
    refilled,
)


def test_time_until_budget_counts_requests_and_tokens_at_the_current_factor() -> None:
    limit = RateLimit("p", requests_per_minute=60, tokens_per_minute=6000)

    assert limit.seconds_until(requests=0.5, tokens=1000, need_tokens=100, f=1.0) == 0.5
    assert limit.seconds_until(requests=1, tokens=0, need_tokens=200, f=0.5) == 4.0
    assert (limit.request_burst, limit.token_burst) == (1.0, 500.0)


def test_limits_parse_and_bad_ones_are_refused() -> None:
    assert parse_limits("ai-interactive=5, ai-background=2") == {
        "ai-interactive": 5,
        "ai-background": 2,
    }
    rates = parse_rate_limits('{"primary": {"requests_per_minute": 600, "burst_requests": 5}}')
    assert rates["primary"].request_burst == 5
    for bad in ("q", "q=0", "q=x", "=3"):
        with pytest.raises(ValueError):
            parse_limits(bad)
    for bad in (
        "[1]",
        "{",
        '{"p": {"requests_per_minute": 0}}',
        '{"p": {"requests_per_minute": 60, "tokens": 5}}',
        '{"p": {"requests_per_minute": -1}}',
    ):
        with pytest.raises(ValueError):
            parse_rate_limits(bad)


def budgets() -> TierBudgets:
    limits = {"p": RateLimit("p", requests_per_minute=60, tokens_per_minute=6000)}
    return TierBudgets(limits, recovery_s=30.0)


def level(
    granted: int, requests: float = 0.0, blocked_until: datetime | None = None
) -> BucketLevel:
    return BucketLevel(
        granted, requests, tokens_left=1000.0, factor=1.0, blocked_until=blocked_until
    )


def test_a_tier_that_could_not_grant_all_it_was_asked_is_spent_until_one_more_fits() -> None:
    tiers = budgets()

    tiers.spent("p", wanted=3, tokens_each=100, level=level(1, requests=0.5))
    assert tiers.spent_keys() == ["p"]
    assert 0.4 < tiers.seconds_until_budget() <= 0.5

    tiers.spent("p", wanted=2, tokens_each=100, level=level(2))
    assert tiers.spent_keys() == []
    assert tiers.seconds_until_budget() == 0.01


def test_a_blocked_tier_is_spent_until_its_block_ends() -> None:
    tiers = budgets()
    until = datetime.now(UTC) + timedelta(seconds=5)

    tiers.spent("p", wanted=1, tokens_each=0, level=level(0, requests=1.0, blocked_until=until))

    assert 4.0 < tiers.seconds_until_budget() <= 5.0


def test_grants_reserve_what_attempts_really_used_once_settled_at_most_a_bucket() -> None:
    tiers = budgets()
    assert tiers.tokens_each("p", estimate=300) == 300

    tiers.settled("p", used=400.0, attempts=2)
    assert tiers.tokens_each("p", estimate=300) == 200
    tiers.settled("p", used=700.0, attempts=1)  # the average moves by a fifth of the news
    assert tiers.tokens_each("p", estimate=300) == 300
    tiers.settled("p", used=50_000.0, attempts=1)
    assert tiers.tokens_each("p", estimate=300) == 500  # a token bucket's worth


def test_a_tier_without_a_token_limit_reserves_no_tokens() -> None:
    tiers = TierBudgets({"r": RateLimit("r", requests_per_minute=60)}, recovery_s=30.0)

    assert tiers.tokens_each("r", estimate=300) == 0


def test_a_bucket_refills_at_the_factor_it_had_up_to_its_capacity() -> None:
    assert refilled(0.0, 0.0, per_minute=120, capacity=5, factor=1.0) == 0.0
    assert refilled(1.0, 1.5, per_minute=120, capacity=5, factor=0.5) == 2.5
    assert refilled(4.0, 60.0, per_minute=120, capacity=5, factor=1.0) == 5.0
    assert refilled(-300.0, 2.0, per_minute=6000, capacity=500, factor=1.0) == -100.0


def test_the_factor_recovers_additively_to_one_and_a_429_halves_it_to_a_floor() -> None:
    assert recovered(0.5, 0.0, recovery_s=30.0) == 0.5
    assert recovered(0.5, 6.0, recovery_s=30.0) == pytest.approx(0.7)
    assert recovered(0.5, 3600.0, recovery_s=30.0) == 1.0
    assert backed_off(1.0) == 0.5
    assert backed_off(0.06) == MIN_RATE_FACTOR


def test_a_blocked_bucket_has_had_no_time_to_refill() -> None:
    now = datetime.now(UTC)

    assert elapsed_since(now - timedelta(seconds=2.5), now) == 2.5
    assert elapsed_since(now + timedelta(seconds=4), now) == 0.0
