"""The chaos checker's verdicts on one job: it must be able to call a job lost, stuck or
duplicated (the harness is only as good as these)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.checker import Report, classify_job
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
    [feynman] = [k for k in KINDS if k.children]
    report = Report("unit", 0)
    stored = row(artifact_attempts=[], children=0)
    classify_job(Submission("k", "u", feynman, job_id="job-1"), stored, report)
    assert len(report.lost) == 1 and report.duplicated == []

    report = Report("unit", 0)
    classify_job(Submission("k", "u", feynman, job_id="job-1"), {**stored, "children": 1}, report)
    assert (report.lost, report.duplicated, report.stuck) == ([], [], [])
