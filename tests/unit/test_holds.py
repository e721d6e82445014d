"""Hold explanations: why a waiting job waits, the first reason in the order a claim checks
them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from job_service.domain.holds import HoldReason, WaitingFacts, explain

NOW = datetime(2026, 12, 1, tzinfo=UTC)


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
        (
            {"next_run_at": NOW + timedelta(hours=1), "error_code": "SUSPENDED_SLEEP"},
            HoldReason.SLEEPING,
        ),
        (
            {"next_run_at": NOW + timedelta(hours=1), "error_code": "SUSPENDED_SIGNAL"},
            HoldReason.WAITING_FOR_SIGNAL,
        ),
        # a retry after a failure is not due, whatever its code
        (
            {"next_run_at": NOW + timedelta(hours=1), "error_code": "PROVIDER_TIMEOUT"},
            HoldReason.NOT_DUE,
        ),
        # woken (due): a sleeper is explained like any due job
        ({"error_code": "SUSPENDED_SIGNAL", "paused": True}, HoldReason.QUEUE_PAUSED),
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
