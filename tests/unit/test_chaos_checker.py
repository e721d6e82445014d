"""The chaos checker's verdicts on one job: it must be able to call a job lost, stuck or
duplicated (the harness is only as good as these), and the scheduler's limits breached: a
delayed job started early, a concurrency key over its limit, a tier over its rate limit, a
redacted value where it must not be."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from job_service.domain.rate_limits import RateLimit
from tests.chaos.checker import (
    KeyedLeases,
    Report,
    billing_breaches,
    bound_for,
    classify_job,
    key_breaches,
    rate_breaches,
)
from tests.chaos.faults import FaultRecord
from tests.chaos.provider_checks import (
    TierWindows,
    leaking_channels,
    most_in_window,
    tier_windows,
    window_bound,
)
from tests.chaos.schedules import slot_breaches
from tests.chaos.step_faults import answered_calls
from tests.chaos.workload import KINDS, Submission

QUICK = KINDS[0]


def row(**overrides: Any) -> dict[str, Any]:
    return {
        "id": "job-1",
        "status": "succeeded",
        "attempt_count": 1,
        "output_attempt": "1",
        "terminal_events": 1,
        "attempts_started": 1,
        "artifact_attempts": ["1"],
        **overrides,
    }


def judge(sub_job_id: str | None, stored: dict[str, Any] | None) -> Report:
    report = Report("unit", 0)
    classify_job(Submission("k", "u", QUICK, job_id=sub_job_id), stored, report)
    return report


def test_a_job_applied_once_is_terminal() -> None:
    report = judge("job-1", row())
    assert report.terminal["succeeded"] == 1
    assert (report.lost, report.duplicated, report.stuck) == ([], [], [])


def test_an_acknowledged_create_without_a_row_is_lost() -> None:
    assert len(judge("job-1", None).lost) == 1


def test_a_create_never_acknowledged_and_never_stored_is_not_lost() -> None:
    report = judge(None, None)
    assert report.lost == [] and report.never_acknowledged == 1


def test_a_job_still_waiting_for_its_first_attempt_is_lost() -> None:
    report = judge("job-1", row(status="queued", attempts_started=0, artifact_attempts=[]))
    assert len(report.lost) == 1 and report.stuck == []


def test_a_started_job_not_terminal_is_stuck() -> None:
    report = judge("job-1", row(status="running", artifact_attempts=[]))
    assert len(report.stuck) == 1 and report.lost == []


@pytest.mark.parametrize(
    "stored",
    [
        row(terminal_events=2),  # two accepted outcomes
        row(artifact_attempts=["1", "2"]),  # artifacts applied twice
        row(
            output_attempt="2", artifact_attempts=["1"]
        ),  # output of one attempt, artifacts of another
        row(status="failed", artifact_attempts=["1"]),  # a refused result's artifacts applied
        row(id="job-2"),  # another job than the one acknowledged
    ],
)
def test_more_than_one_accepted_outcome_is_duplicated(stored: dict[str, Any]) -> None:
    assert len(judge("job-1", stored).duplicated) == 1


def test_a_succeeded_parent_without_its_child_lost_the_child() -> None:
    [feynman] = [k for k in KINDS if k.name == "feynman"]
    report = Report("unit", 0)
    stored = row(artifact_attempts=[], children=0)
    classify_job(Submission("k", "u", feynman, job_id="job-1"), stored, report)
    assert len(report.lost) == 1 and report.duplicated == []

    report = Report("unit", 0)
    classify_job(Submission("k", "u", feynman, job_id="job-1"), {**stored, "children": 1}, report)
    assert (report.lost, report.duplicated, report.stuck) == ([], [], [])


# --------------------------------------------------------------------------- scheduling

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
KEY = "keyed:user=u"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_delayed_job_started_before_its_time_is_a_violation() -> None:
    sub = Submission("k", "u", QUICK, job_id="job-1", run_at=at(2.0))
    report = Report("unit", 0)
    classify_job(sub, row(first_started=at(1.999)), report)
    assert report.started_early == 1 and len(report.violations) == 1
    assert "early" in report.violations[0]


def test_a_delayed_job_started_at_or_after_its_time_is_not() -> None:
    for started in (at(2.0), at(2.5), None):  # None: never started (cancelled while waiting)
        report = Report("unit", 0)
        sub = Submission("k", "u", QUICK, job_id="job-1", run_at=at(2.0))
        classify_job(sub, row(first_started=started), report)
        assert report.delayed == 1 and report.violations == [] and report.started_early == 0


def test_a_priority_stored_other_than_asked_is_a_violation() -> None:
    report = Report("unit", 0)
    classify_job(Submission("k", "u", QUICK, job_id="job-1", priority=5), row(priority=0), report)
    assert report.prioritised == 1 and len(report.violations) == 1


def events(*attempts: tuple[str, float, float | None, str]) -> list[dict[str, Any]]:
    """Transitions of keyed jobs: (job, into running at, out at (None: still leased), to)."""
    rows = []
    for job, start, end, to in sorted(attempts):
        rows.append(
            {"job_id": job, "key": KEY, "limit": 2, "to_status": "running", "at": at(start)}
        )
        if end is not None:
            rows.append({"job_id": job, "key": KEY, "limit": 2, "to_status": to, "at": at(end)})
    return rows


def test_more_attempts_of_a_key_leased_at_once_than_its_limit_is_a_breach() -> None:
    figures, breaches = key_breaches(
        events(("a", 0, 3, "succeeded"), ("b", 1, 4, "succeeded"), ("c", 2, 5, "failed"))
    )
    assert figures[KEY] == (3, 3, 2)
    assert len(breaches) == 1 and "3 attempts leased at once (limit 2)" in breaches[0]


def test_a_killed_workers_attempt_holds_its_slot_until_its_lease_is_reaped() -> None:
    # a's worker died at 1 s; the reaper expired its lease at 3 s (to retrying): the grant
    # of c at 2 s made three leased at once, as the database counts them
    figures, breaches = key_breaches(
        events(("a", 0, 3, "retrying"), ("b", 0.5, 6, "succeeded"), ("c", 2, 6, "succeeded"))
    )
    assert len(breaches) == 1 and figures[KEY][1] == 3


def test_cancel_requested_still_holds_the_slot_and_a_still_leased_attempt_too() -> None:
    rows = events(("a", 0, 1, "cancel_requested"), ("b", 0.5, None, ""), ("c", 2, 4, "succeeded"))
    # a: running -> cancel_requested at 1 s -> cancelled at 5 s
    rows.append({"job_id": "a", "key": KEY, "limit": 2, "to_status": "cancelled", "at": at(5)})
    rows.sort(key=lambda r: (r["job_id"], r["at"]))
    _, breaches = key_breaches(rows)
    assert len(breaches) == 1


def test_attempts_that_follow_each_other_within_the_limit_are_no_breach() -> None:
    # c starts when a ends (and a retry of a after b ends); overlaps shorter than the
    # slack (timestamps are transaction starts) do not count
    figures, breaches = key_breaches(
        events(
            ("a", 0, 2, "retrying"),
            ("b", 0, 4, "succeeded"),
            ("c", 2, 5, "succeeded"),
            ("d", 3.9, 6, "succeeded"),
        )
    )
    assert breaches == [] and figures[KEY] == (4, 2, 2)


LIMIT = RateLimit("cheap", requests_per_minute=120, burst_requests=2)  # 2/s, bucket of 2


def test_grants_within_the_bucket_are_no_breach() -> None:
    grants = [at(0), at(0.01)] + [at(0.5 * n) for n in range(1, 39)]  # the burst, then 2/s
    figures, breaches = rate_breaches("cheap", grants, LIMIT)
    assert breaches == [] and figures == (40, 3, 4.0)


def test_more_grants_in_a_second_than_rate_plus_burst_is_a_breach() -> None:
    grants = [at(0.1 * n) for n in range(6)]  # 6 in 0.5 s: the bucket allows 2 + 1 (+ 1)
    figures, breaches = rate_breaches("cheap", grants, LIMIT)
    assert figures[1] == 6 and len(breaches) == 1 and "rate limit of tier cheap" in breaches[0]


def test_a_sustained_rate_above_the_limit_is_a_breach_in_no_single_second() -> None:
    # 3 a second for 20 s: never more than rate + burst + 1 in one second, but the bucket
    # (2 + 2/s) is overdrawn after a few seconds
    grants = [at(n / 3) for n in range(60)]
    figures, breaches = rate_breaches("cheap", grants, LIMIT)
    assert figures[1] <= 5 and len(breaches) == 1


# --- billing: every provider call has its usage row ------------------------------------


def test_billing_holds_when_every_call_has_its_row() -> None:
    assert billing_breaches(10, 10, 0, Report("unit", 0)) == []


def test_billing_fails_on_more_usage_rows_than_provider_calls() -> None:
    [breach] = billing_breaches(10, 11, 0, Report("unit", 0))
    assert "11 usage rows for 10 provider calls" in breach


def test_billing_attributes_missing_rows_to_attempts_with_unknown_usage_only() -> None:
    report = Report("unit", 0)
    assert billing_breaches(10, 7, 2, report) == []  # a killed worker's calls
    [breach] = billing_breaches(10, 7, 1, report)
    assert "3 provider calls without a usage row" in breach
    assert (report.provider_calls, report.usage_rows, report.usage_unknown) == (10, 7, 1)


def test_answered_calls_are_counted_per_job_from_the_fake_providers_lines(tmp_path: Path) -> None:
    lines = [
        {"msg": "fake provider call 1", "job_id": "a"},
        {"msg": "fake provider answered call 1", "job_id": "a"},
        {"msg": "fake provider call 2", "job_id": "a"},  # failed: no answer line
        {"msg": "fake provider answered call 3", "job_id": "b"},
        {"msg": "fake provider answered call 4", "job_id": "b"},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"msg": "fake provider answ'
    (tmp_path / "w1.1.log").write_text(text)  # the last line cut by a SIGKILL
    (tmp_path / "js1.1.log").write_text(json.dumps(lines[1]))  # not a worker's log

    assert answered_calls(tmp_path) == {"a": 1, "b": 2}


def test_the_schedule_rule_finds_a_slot_fired_twice_a_gap_and_a_skip() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    good = [(t0 + timedelta(seconds=n), 1) for n in range(5)]
    assert slot_breaches(good, {}) == []
    twice = [*good[:2], (good[2][0], 2), *good[3:]]
    gap = [*good[:2], *good[3:]]
    assert [len(slot_breaches(s, {})) for s in (twice, gap)] == [1, 1]
    assert slot_breaches(good, {"skipped_missed": 3}) == [
        "schedule: 3 slots recorded skipped_missed"
    ]
    assert slot_breaches([], {}) == ["schedule: no slot fired"]


def test_the_provider_rate_rule_counts_sliding_windows_against_burst_plus_refill() -> None:
    limit = RateLimit("cheap", requests_per_minute=120, burst_requests=2)
    assert (window_bound(limit, 1.0), window_bound(limit, 60.0)) == (4, 122)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def call(seconds: float, job: str = "j") -> dict[str, Any]:
        return {
            "msg": "fake provider call 1",
            "ts": (t0 + timedelta(seconds=seconds)).isoformat(),
            "job_id": job,
        }

    # 4 in any second is the limit; the window [0.5, 1.5) holds 5
    calls = [call(0.0), call(0.5), call(0.6), call(0.7), call(0.9), call(1.4), call(5.0, "p")]
    figures, breaches = tier_windows(calls, {"j": "cheap", "p": "primary"}, {"cheap": limit})
    assert (figures["cheap"].calls, figures["cheap"].peak_1s) == (6, 5)
    [breach] = breaches
    assert "5 requests in 1 s" in breach and "limit 4" in breach
    # a call's own tier wins over its job's: the same calls on the primary tier pass
    tagged = [{**c, "model": "fake-primary"} for c in calls]
    assert tier_windows(tagged, {"j": "cheap"}, {"cheap": limit}) == (
        {"cheap": TierWindows(0, 0, 4, 0, 122)},
        [],
    )
    assert most_in_window([0.0, 0.99, 1.0, 1.5], 1.0) == (3, 0.99)


def test_a_redacted_value_leaks_in_its_job_its_descendants_and_unowned_rows_only() -> None:
    secret = "the summary nobody may read"
    values = {"r": [secret], "quiet": ["another secret summary"]}
    # r redacts; c is its child; twin is an unrelated job that answered the same text
    parents: dict[str, str | None] = {"r": None, "c": "r", "twin": None, "quiet": None}
    rows: dict[str, list[tuple[str | None, str]]] = {
        "job_steps": [("twin", f"(twin, {secret})")],  # a non-redacting job's own text
        "job_snapshots": [("c", f"(c, {secret})")],  # the child's input: a leak
        "outbox_events": [("schedule-1", f"(schedule-1, {secret})")],  # no job's id
        "logs": [(None, f"job r answered {secret}")],
        "jobs": [("r", "(r, redacted)"), ("quiet", "(quiet, redacted)")],
    }
    leaked = leaking_channels(values, parents, rows)
    assert leaked == {"job_snapshots": ["r"], "outbox_events": ["r"], "logs": ["r"]}
    # the twin's row counted as r's leak before the search was scoped to r's family
    assert leaking_channels(values, {}, rows)["job_steps"] == ["r"]


def test_a_keyed_job_waiting_while_its_key_runs_its_limit_of_others_waits_its_turn() -> None:
    t0 = datetime(2026, 12, 2, tzinfo=UTC)

    def event(job: str, status: str, seconds: float) -> dict[str, Any]:
        return {
            "job_id": job,
            "key": "k",
            "limit": 2,
            "to_status": status,
            "at": t0 + timedelta(seconds=seconds),
        }

    # j is returned at 2 s and runs again at 6 s; a and b fill the key from 2 to 4 s, c
    # alone from 4 to 5 s (a free slot), c and d from 5 to 6 s
    events = [
        event("a", "running", 1.0),
        event("a", "succeeded", 4.0),
        event("b", "running", 2.0),
        event("b", "succeeded", 4.0),
        event("c", "running", 4.0),
        event("c", "succeeded", 7.0),
        event("d", "running", 5.0),
        event("d", "succeeded", 6.0),
        event("j", "running", 0.0),
        event("j", "retrying", 2.0),
        event("j", "running", 6.0),
        event("j", "succeeded", 8.0),
    ]
    keys = KeyedLeases.of(events)
    start = (t0 + timedelta(seconds=1.0)).timestamp()
    back = (t0 + timedelta(seconds=6.0)).timestamp()
    # full from 2 to 4 (a, b) and 5 to 6 (c, d): 3 s of the 5 waited
    assert keys.full_for_others("j", start, back) == pytest.approx(3.0)
    assert keys.full_for_others("unkeyed", start, back) == 0.0


def test_an_ai_job_a_worker_fault_hit_is_held_to_the_ai_bound() -> None:
    record = FaultRecord("worker_pause", "w1", 0.0, ["ai", "plain"], 5.7, ai_bound_s=7.5)
    assert bound_for(record, "ai", {"ai"}) == 7.5
    assert bound_for(record, "plain", {"ai"}) == 5.7
    no_ai_bound = FaultRecord("nats_data_loss", "nats", 0.0, ["ai"], 8.0)
    assert bound_for(no_ai_bound, "ai", {"ai"}) == 8.0
