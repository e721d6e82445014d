"""The chaos checker's join rule (tests/chaos/joins.py): it must be able to call a join
started before its last dependency ended, one stuck or failed though it may run, one its
policy should have ended that ran, and a miscounted edge a violation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.registry import DependencyPolicy
from tests.chaos.joins import JOIN_KINDS, Verdict, judge, summary
from tests.chaos.workload import Submission

T0 = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)
RUN, FAIL, CANCEL = DependencyPolicy.RUN, DependencyPolicy.FAIL, DependencyPolicy.CANCEL


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def edge(dep: str, status: str = "succeeded", ended_s: float = 1.0) -> dict[str, Any]:
    """A dependency that ended ``status`` at ``ended_s``, counted then."""
    return {
        "join_id": "join",
        "id": dep,
        "ended_status": status,
        "ended_at": at(ended_s),
        "status": status,
        "finished_at": at(ended_s),
    }


def ran(started_s: float = 2.0, **overrides: Any) -> dict[str, Any]:
    """A join that ran once, from ``started_s``, and succeeded."""
    return {
        "id": "join",
        "status": "succeeded",
        "error_code": None,
        "attempt_count": 1,
        "policy": "run",
        "created_at": at(0.0),
        "started_at": at(started_s),
        "finished_at": at(started_s + 0.1),
        "first_started": at(started_s),
        "attempts_started": 1,
        "releases": 1,
        **overrides,
    }


def ended_by(policy: DependencyPolicy, finished_s: float = 1.5, **overrides: Any) -> dict[str, Any]:
    """A join its policy ended without running."""
    status, code = {
        FAIL: ("failed", "DEPENDENCY_FAILED"),
        CANCEL: ("cancelled", "DEPENDENCY_CANCELLED"),
    }[policy]
    fields = {
        "policy": policy.value,
        "status": status,
        "error_code": code,
        "attempt_count": 0,
        "attempts_started": 0,
        "started_at": None,
        "first_started": None,
        "finished_at": at(finished_s),
    }
    return ran(**{**fields, **overrides})


def join_of(policy: DependencyPolicy, *deps: str) -> Submission:
    return Submission("join-1", "u", JOIN_KINDS[policy], depends_on=deps, policy=policy)


def test_a_join_that_ran_after_its_last_dependency_ended_passes() -> None:
    verdict = judge(
        join_of(RUN, "a", "b"), ran(2.0), [edge("a", ended_s=0.5), edge("b", ended_s=1.9)]
    )
    assert verdict.violations == [] and verdict.outcome == "run: ran" and verdict.waited
    assert verdict.release_s == pytest.approx(0.1)
    # created after every dependency had ended: it did not wait
    assert not judge(join_of(RUN, "a"), ran(2.0, created_at=at(1.5)), [edge("a")]).waited


def test_a_join_started_before_its_last_dependency_ended_is_a_violation() -> None:
    deps = [edge("a", ended_s=0.5), edge("b", ended_s=2.5)]
    [breach] = judge(join_of(RUN, "a", "b"), ran(2.0), deps).violations
    assert "0.500s before its last dependency b ended" in breach
    # the first attempt counts, not a retry's started_at
    [breach] = judge(join_of(RUN, "a", "b"), ran(3.0, first_started=at(2.0)), deps).violations
    assert "before its last dependency b ended" in breach


def test_a_join_counted_after_it_started_started_too_early() -> None:
    # its dependency's row says it ended before, but the edge counted it only later
    late = {**edge("a", ended_s=1.0), "ended_at": at(3.0)}
    [breach] = judge(join_of(RUN, "a"), ran(2.0), [late]).violations
    assert "before its last dependency a ended" in breach


def test_a_run_join_runs_whatever_its_dependencies_ended_as() -> None:
    deps = [edge("a", "failed"), edge("b", "cancelled"), edge("c")]
    assert judge(join_of(RUN, "a", "b", "c"), ran(2.0), deps).violations == []


@pytest.mark.parametrize(
    "join",
    [
        ran(
            status="created",
            attempts_started=0,
            attempt_count=0,
            started_at=None,
            first_started=None,
        ),
        ran(status="failed", error_code="DEPENDENCY_FAILED", attempt_count=0),
        ran(status="failed", error_code="JOB_REJECTED"),
    ],
)
def test_a_run_join_whose_dependencies_all_ended_must_have_succeeded(join: dict[str, Any]) -> None:
    deps = [edge("a", "failed"), edge("b")]
    [breach] = judge(join_of(RUN, "a", "b"), join, deps).violations
    assert "its dependencies all ended and it may run" in breach


def test_a_join_released_twice_is_a_violation() -> None:
    [breach] = judge(join_of(RUN, "a"), ran(releases=2), [edge("a")]).violations
    assert "left CREATED 2 times" in breach


@pytest.mark.parametrize("policy", [FAIL, CANCEL])
def test_a_join_its_policy_ends_never_runs(policy: DependencyPolicy) -> None:
    deps = [edge("a", "failed", ended_s=1.0), edge("b", ended_s=0.5)]
    verdict = judge(join_of(policy, "a", "b"), ended_by(policy), deps)
    assert verdict.violations == [] and verdict.outcome == f"{policy.value}: ended by a dependency"

    ran_anyway = ran(2.0, policy=policy.value)
    breaches = judge(join_of(policy, "a", "b"), ran_anyway, deps).violations
    assert len(breaches) == 2  # not its policy's status, and it ran
    assert any("ran (succeeded" in b for b in breaches)


def test_a_fail_join_ends_failed_with_its_error_and_not_before_a_dependency_failed() -> None:
    deps = [edge("a", "cancelled", ended_s=1.0)]
    wrong_code = ended_by(FAIL, error_code="DEPENDENCY_CANCELLED")
    [breach] = judge(join_of(FAIL, "a"), wrong_code, deps).violations
    assert "failed (DEPENDENCY_FAILED)" in breach
    [breach] = judge(join_of(FAIL, "a"), ended_by(FAIL, finished_s=0.9), deps).violations
    assert "before any dependency failed" in breach


def test_a_fail_join_whose_dependencies_all_succeeded_runs() -> None:
    deps = [edge("a"), edge("b")]
    assert judge(join_of(FAIL, "a", "b"), ran(2.0, policy="fail"), deps).violations == []
    [breach] = judge(join_of(FAIL, "a", "b"), ended_by(FAIL), deps).violations
    assert "it may run" in breach


def test_an_edge_marked_other_than_its_dependency_ended_is_a_violation() -> None:
    miscounted = {**edge("a"), "ended_status": "failed"}
    [breach] = judge(join_of(RUN, "a"), ran(2.0), [miscounted]).violations
    assert "ended succeeded, counted as failed" in breach
    never_marked = {**edge("a", ended_s=1.0), "ended_status": None, "ended_at": None}
    [breach] = judge(join_of(RUN, "a"), ran(2.0), [never_marked]).violations
    assert "counted as None" in breach


def test_a_join_waiting_for_other_jobs_than_it_was_created_with_is_a_violation() -> None:
    [breach] = judge(join_of(RUN, "a", "b"), ran(2.0), [edge("a"), edge("c")]).violations
    assert "not for ['b']" in breach
    [breach] = judge(join_of(CANCEL, "a"), ran(2.0), [edge("a")]).violations
    assert "stored with policy run, created with cancel" in breach


def test_a_join_with_a_dependency_not_ended_is_not_judged() -> None:
    running = {**edge("a"), "status": "running", "ended_status": None, "finished_at": None}
    waiting = ran(status="created", attempts_started=0, started_at=None, first_started=None)
    verdict = judge(join_of(RUN, "a"), waiting, [running])
    assert verdict.violations == [] and verdict.unjudged is not None
    assert "dependency a running" in verdict.unjudged


def test_the_summary_counts_dependencies_outcomes_and_release_times() -> None:
    verdicts = [
        Verdict("run: ran", [], 0.2, waited=True),
        Verdict("run: ran", [], 0.4),
        Verdict("fail: ended by a dependency", []),
    ]
    assert summary(verdicts, [200, 1, 3]) == (
        "204 dependencies (1..200 a join), 1 joins waited;"
        " fail: ended by a dependency 1, run: ran 2;"
        " last dependency ended to first attempt: median 0.30 s, most 0.40 s"
    )
