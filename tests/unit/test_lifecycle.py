"""The job lifecycle (DESIGN §3): exactly the legal transitions, nothing else.

The expected table is written out here from DESIGN.md §3, not derived from the module, so
an entry added to or dropped from ``TRANSITIONS`` makes these tests fail.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job_service.domain.lifecycle import (
    ACTIVE,
    LEASED,
    LOCKABLE,
    RERUNNABLE,
    TERMINAL,
    TRANSITIONS,
    UNFINISHED,
    IllegalTransition,
    JobStatus,
    Step,
    sources,
    status_values,
    statuses_sql,
    transition,
)

# DESIGN §3, row by row (from, why) -> to.
EXPECTED: dict[tuple[str, str], str] = {
    # queued / retrying -> running: LockJob CAS succeeds
    ("queued", "lock"): "running",
    ("retrying", "lock"): "running",
    # queued / retrying -> cancelled: CancelJob
    ("queued", "cancel"): "cancelled",
    ("retrying", "cancel"): "cancelled",
    # created -> running: a delayed job (run_at / delay), locked once due
    ("created", "lock"): "running",
    # created -> cancelled: CancelJob while it waits for its time
    ("created", "cancel"): "cancelled",
    # created -> failed: a dependency failed and the job's policy fails it (never run)
    ("created", "dependency_failed"): "failed",
    # running -> succeeded: SubmitResult with the current lease token
    ("running", "succeed"): "succeeded",
    # running -> retrying: retryable failure or expired lease, attempts left
    ("running", "retry"): "retrying",
    # running -> failed: non-retryable failure, or attempts exhausted
    ("running", "fail"): "failed",
    # running -> cancel_requested: CancelJob while running
    ("running", "cancel"): "cancel_requested",
    # cancel_requested -> cancelled: worker confirms, or its lease expires
    ("cancel_requested", "confirm_cancel"): "cancelled",
    # ADR 0013 (beyond DESIGN §3): an unfinished job past its deadline fails, a running
    # one with its attempt stopped; a pending cancel is left to end it cancelled
    ("created", "deadline"): "failed",
    ("queued", "deadline"): "failed",
    ("retrying", "deadline"): "failed",
    ("running", "deadline"): "failed",
}
ALL_STATUSES = {
    "created",
    "queued",
    "running",
    "retrying",
    "cancel_requested",
    "succeeded",
    "failed",
    "cancelled",
}
TERMINAL_STATUSES = {"succeeded", "failed", "cancelled"}
ALL_STEPS = {
    "lock",
    "cancel",
    "succeed",
    "retry",
    "fail",
    "confirm_cancel",
    "dependency_failed",
    "deadline",
}

PAIRS = list(itertools.product(JobStatus, Step))


def test_the_states_are_those_of_the_design() -> None:
    assert {s.value for s in JobStatus} == ALL_STATUSES
    assert {s.value for s in Step} == ALL_STEPS


def test_terminal_states_are_succeeded_failed_cancelled() -> None:
    assert {s.value for s in TERMINAL} == TERMINAL_STATUSES
    for status in JobStatus:
        assert status.terminal is (status.value in TERMINAL_STATUSES), status


@pytest.mark.parametrize(("source", "step"), sorted(EXPECTED))
def test_every_legal_transition_is_in_the_table_with_its_target(source: str, step: str) -> None:
    assert TRANSITIONS[(JobStatus(source), Step(step))] == JobStatus(EXPECTED[(source, step)])
    assert transition(JobStatus(source), Step(step)) == JobStatus(EXPECTED[(source, step)])


def test_the_table_holds_nothing_beyond_the_design() -> None:
    actual = {(s.value, st_.value): t.value for (s, st_), t in TRANSITIONS.items()}
    assert actual == EXPECTED


def _check_pair(status: JobStatus, step: Step) -> None:
    expected = EXPECTED.get((status.value, step.value))
    if expected is None:
        with pytest.raises(IllegalTransition) as info:
            transition(status, step)
        assert info.value.status is status
        assert info.value.step is step
        assert status.value in str(info.value)
        assert step.value in str(info.value)
    else:
        assert transition(status, step) is JobStatus(expected)


@settings(database=None, max_examples=200)
@given(status=st.sampled_from(JobStatus), step=st.sampled_from(Step))
def test_transition_returns_the_expected_target_or_raises(status: JobStatus, step: Step) -> None:
    _check_pair(status, step)


@pytest.mark.parametrize(("status", "step"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_every_status_step_pair_exhaustively(status: JobStatus, step: Step) -> None:
    _check_pair(status, step)


def test_the_exhaustive_loop_covers_every_pair_and_finds_the_legal_ones() -> None:
    legal = []
    for status, step in PAIRS:
        try:
            after = transition(status, step)
        except IllegalTransition:
            continue
        legal.append((status.value, step.value, after.value))
    assert len(PAIRS) == len(ALL_STATUSES) * len(ALL_STEPS)
    assert sorted(legal) == sorted((s, st_, t) for (s, st_), t in EXPECTED.items())


@settings(database=None)
@given(status=st.sampled_from(sorted(TERMINAL_STATUSES)), step=st.sampled_from(Step))
def test_terminal_statuses_never_move(status: str, step: Step) -> None:
    with pytest.raises(IllegalTransition):
        transition(JobStatus(status), step)


@pytest.mark.parametrize("step", list(Step))
def test_sources_match_the_design(step: Step) -> None:
    expected = {s for (s, why) in EXPECTED if why == step.value}
    assert {s.value for s in sources(step)} == expected
    assert isinstance(sources(step), frozenset)


def test_sources_of_the_main_steps() -> None:
    # Spelled out: these are the ``status = ANY(:from)`` sets of the adapters' CAS.
    assert sources(Step.LOCK) == {JobStatus.CREATED, JobStatus.QUEUED, JobStatus.RETRYING}
    assert sources(Step.CANCEL) == {
        JobStatus.CREATED,
        JobStatus.QUEUED,
        JobStatus.RETRYING,
        JobStatus.RUNNING,
    }
    assert sources(Step.CONFIRM_CANCEL) == {JobStatus.CANCEL_REQUESTED}
    for step in (Step.SUCCEED, Step.RETRY, Step.FAIL):
        assert sources(step) == {JobStatus.RUNNING}


def test_a_waiting_created_job_is_locked_cancelled_or_failed_by_dependency_or_deadline() -> None:
    allowed = {Step.LOCK, Step.CANCEL, Step.DEPENDENCY_FAILED, Step.DEADLINE}
    for step in set(Step) - allowed:
        assert JobStatus.CREATED not in sources(step)
        with pytest.raises(IllegalTransition):
            transition(JobStatus.CREATED, step)


def test_a_cancel_requested_job_cannot_succeed_or_be_cancelled_again() -> None:
    # A late SubmitResult after CancelJob must not resurrect the job as succeeded.
    for step in (Step.SUCCEED, Step.CANCEL, Step.LOCK, Step.RETRY):
        with pytest.raises(IllegalTransition):
            transition(JobStatus.CANCEL_REQUESTED, step)


def test_the_named_status_sets_are_spelled_out() -> None:
    """Every module and statement takes its status sets from these names; written out here
    so a change to the table that moves a set fails."""
    assert status_values(LOCKABLE) == ["created", "queued", "retrying"]
    assert status_values(LEASED) == ["cancel_requested", "running"]
    assert status_values(TERMINAL) == ["cancelled", "failed", "succeeded"]
    assert status_values(RERUNNABLE) == ["cancelled", "failed"]
    assert set(status_values(UNFINISHED)) == {"queued", "running", "retrying", "cancel_requested"}
    assert status_values(ACTIVE) == sorted([*status_values(UNFINISHED), "created"])


def test_status_lists_in_sql_match_the_partial_indexes_text() -> None:
    """The planner matches a partial index only when a query implies its predicate; the
    indexes (migrations 0001 and 0005) spell these lists in this order."""
    assert (
        statuses_sql(ACTIVE) == "('created', 'queued', 'running', 'retrying', 'cancel_requested')"
    )
    assert statuses_sql(LEASED) == "('running', 'cancel_requested')"
    # migration 0006: jobs_claim, jobs_fair_share
    assert statuses_sql(LOCKABLE) == "('created', 'queued', 'retrying')"
