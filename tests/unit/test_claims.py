"""The claim policy's pure parts: admission under concurrency keys and a queue limit, the
rate-limit trim, and a new waiting job's place in line (its SQL rendering is compared with
it in tests/integration/test_place_in_line.py)."""

from __future__ import annotations

import pytest

from job_service.domain.claims import (
    ClaimCandidate,
    admit,
    keys_to_count,
    place_in_line,
    rate_demand,
    within_rate,
)


def job(n: int, key: str | None = None, limit: int = 0, tier: str | None = None) -> ClaimCandidate:
    return ClaimCandidate(f"j{n}", key, limit, tier)


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


@pytest.mark.parametrize(
    ("due", "priority", "backlog_last", "place"),
    [
        (1000.0, 0, None, 1000.0),  # nothing ahead of it: its due time
        (1000.0, 2, None, 980.0),  # each priority level is worth one step of waiting
        (1000.0, -1, None, 1010.0),
        (1000.0, 0, 1200.0, 1200.5),  # behind its own backlog, one quantum after its tail
        (1000.0, 0, 900.0, 1000.0),  # a backlog behind its due time does not delay it
        (1000.0, 3, 975.0, 975.5),  # priority moves it ahead, its backlog holds it back
    ],
)
def test_a_new_job_takes_its_place_after_its_own_backlog_and_ahead_by_its_priority(
    due: float, priority: int, backlog_last: float | None, place: float
) -> None:
    assert place_in_line(due, priority, backlog_last, step=10.0, quantum=0.5) == place


def test_a_backlog_of_one_fairness_key_is_spaced_one_quantum_apart() -> None:
    places: list[float] = []
    for _ in range(4):
        places.append(place_in_line(1000.0, 0, places[-1] if places else None, quantum=0.05))

    assert places == pytest.approx([1000.0, 1000.05, 1000.1, 1000.15])
