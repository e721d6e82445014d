"""The scheduling policy's pure parts: admission under concurrency keys and a queue limit,
the rate-limit trim, hold explanations and the settings' parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from job_service.domain.scheduling import (
    Candidate,
    HoldReason,
    RateLimit,
    WaitingFacts,
    admit,
    explain,
    keys_to_count,
    parse_limits,
    parse_rate_limits,
    rate_demand,
    within_rate,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def job(n: int, key: str | None = None, limit: int = 0, tier: str | None = None) -> Candidate:
    return Candidate(f"j{n}", key, limit, tier)


def test_admission_keeps_line_order_and_skips_a_full_key_without_stopping() -> None:
    line = [job(1, "a", 2), job(2, "a", 2), job(3, "a", 2), job(4, "b", 1), job(5)]

    admitted = admit(line, want=5, running={"a": 1}, queue="q", queue_limit=0)

    assert [c.job_id for c in admitted] == ["j1", "j4", "j5"]


def test_admission_stops_at_the_queue_limit_and_at_what_was_asked() -> None:
    line = [job(n) for n in range(10)]

    assert len(admit(line, want=3, running={}, queue="q", queue_limit=0)) == 3
    assert len(admit(line, want=10, running={"queue:q": 7}, queue="q", queue_limit=8)) == 1


def test_the_keys_a_claim_locks_are_sorted_and_include_a_limited_queue() -> None:
    line = [job(1, "b", 1), job(2, "a", 1), job(3, "b", 1), job(4)]

    assert keys_to_count(line, "q", 0) == ["a", "b"]
    assert keys_to_count(line, "q", 5) == ["a", "b", "queue:q"]


def test_rate_limits_trim_each_tier_to_what_it_granted_in_line_order() -> None:
    admitted = [job(1, tier="p"), job(2), job(3, tier="p"), job(4, tier="c"), job(5, tier="p")]

    assert rate_demand(admitted) == {"c": 1, "p": 3}
    kept = within_rate(admitted, {"p": 1, "c": 0})
    assert [c.job_id for c in kept] == ["j1", "j2"]


def test_time_until_budget_counts_requests_and_tokens_at_the_current_factor() -> None:
    limit = RateLimit("p", requests_per_minute=60, tokens_per_minute=6000)

    assert limit.seconds_until(requests=0.5, tokens=1000, need_tokens=100, f=1.0) == 0.5
    assert limit.seconds_until(requests=1, tokens=0, need_tokens=200, f=0.5) == 4.0
    assert (limit.request_burst, limit.token_burst) == (1.0, 500.0)


def facts(**changes: object) -> WaitingFacts:
    base = dict(
        queue="q",
        definition="t@1",
        next_run_at=None,
        now=NOW,
        paused=False,
        concurrency_key=None,
        concurrency_limit=0,
        key_running=0,
        queue_limit=0,
        queue_running=0,
        rate_key=None,
        rate_blocked_until=None,
        rate_spent=False,
        live_definitions=None,
    )
    return WaitingFacts(**{**base, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, HoldReason.READY),
        ({"next_run_at": NOW + timedelta(hours=1)}, HoldReason.NOT_DUE),
        ({"paused": True}, HoldReason.QUEUE_PAUSED),
        ({"live_definitions": frozenset({"t@0"})}, HoldReason.NO_WORKER_FOR_VERSION),
        (
            {"concurrency_key": "k", "concurrency_limit": 2, "key_running": 2},
            HoldReason.CONCURRENCY_KEY_FULL,
        ),
        ({"queue_limit": 3, "queue_running": 3}, HoldReason.QUEUE_FULL),
        ({"rate_key": "p", "rate_spent": True}, HoldReason.RATE_LIMITED),
        (
            {"rate_key": "p", "rate_blocked_until": NOW + timedelta(seconds=2)},
            HoldReason.RATE_LIMITED,
        ),
    ],
)
def test_a_waiting_job_is_explained_by_the_first_thing_that_holds_it(
    changes: dict[str, object], reason: HoldReason
) -> None:
    assert explain(facts(**changes)).reason is reason


def test_a_due_job_in_a_paused_queue_is_explained_as_paused_not_full() -> None:
    hold = explain(facts(paused=True, queue_limit=1, queue_running=1))
    assert (hold.reason, hold.key) == (HoldReason.QUEUE_PAUSED, "q")


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
