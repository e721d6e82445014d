"""The chaos check of signal-waiting jobs must be able to call a signal lost or
duplicated (the harness is only as good as its verdicts)."""

from __future__ import annotations

from typing import Any

from tests.chaos import signals
from tests.chaos.checker import Report
from tests.chaos.workload import KINDS, Submission

SIGNALLED = next(k for k in KINDS if k.name == "signalled")


class Pool:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        return self.rows


def sub(**acked: float) -> Submission:
    s = Submission("k", "u", SIGNALLED, job_id="job-1")
    for i, name in enumerate(acked, start=1):
        s.signals[name] = (i, acked[name])
    return s


def succeeded(*received: tuple[str, int]) -> dict[str, Any]:
    output = {"signals": [{"name": n, "payload": {"v": v}} for n, v in received]}
    return {"id": "job-1", "status": "succeeded", "validated_output": output}


async def judge(submission: Submission, row: dict[str, Any]) -> Report:
    report = Report("unit", 0)
    await signals.check(Pool([row]), [submission], report)  # type: ignore[arg-type]
    return report


async def test_every_acknowledged_signal_received_once_in_order_passes() -> None:
    report = await judge(sub(first=1.0, second=2.0), succeeded(("first", 1), ("second", 2)))
    assert report.ok


async def test_a_missing_or_misordered_signal_is_lost() -> None:
    missing = await judge(sub(first=1.0, second=2.0), succeeded(("first", 1)))
    swapped = await judge(sub(first=1.0, second=2.0), succeeded(("second", 2), ("first", 1)))
    assert missing.lost and swapped.lost


async def test_a_signal_received_twice_is_duplicated() -> None:
    report = await judge(sub(first=1.0), succeeded(("first", 1), ("first", 1)))
    assert report.duplicated and not report.lost


async def test_a_job_that_gave_up_on_an_acknowledged_signal_lost_it() -> None:
    row = {
        "id": "job-1",
        "status": "failed",
        "error_code": "JOB_REJECTED",
        "internal_error_message": "no signal 'second' within 20s",
        "finished_at": 100.0,
    }
    assert (await judge(sub(first=1.0, second=50.0), row)).lost
    assert (await judge(sub(first=1.0, second=99.0), row)).ok  # acked as it gave up
