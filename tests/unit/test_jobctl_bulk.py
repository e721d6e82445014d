"""``cancel-many`` / ``retry-many`` against the fake AdminService of
``durable_jobs_client.testing``: the selection the options make, the count-confirm-loop
order, progress, the formats and the exit statuses. (Against the real service:
tests/e2e/test_jobctl_bulk.py.)"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.testing import FakeJobService

from jobctl.cli import parse
from jobctl.commands import bulk
from jobctl.exits import Exit, UsageError

QUEUED, FAILED = job_pb2.JOB_STATUS_QUEUED, job_pb2.JOB_STATUS_FAILED


def fleet(
    ids: list[str], status: job_pb2.JobStatus = QUEUED, refuse: set[str] | None = None
) -> FakeJobService:
    """A job service holding jobs of type "t" named ``ids`` (oldest first), each in
    ``status``; a retry of those in ``refuse`` is refused: their parent has a live child of
    their type."""
    service = FakeJobService()
    service.put(*(job_pb2.Job(id=i, job_type="t", status=status) for i in ids))
    for job_id in refuse or ():
        sibling = job_pb2.Job(
            id=f"{job_id}-sibling", job_type="t", status=job_pb2.JOB_STATUS_RUNNING
        )
        parent = job_pb2.Job(
            id=f"{job_id}-parent", job_type="split", child_job_ids=[job_id, sibling.id]
        )
        service.jobs[job_id].parent_job_id = parent.id
        service.put(sibling, parent)
    return service


def calls(fake: FakeJobService) -> list[dict[str, Any]]:
    """The bulk calls jobctl made (CancelJobs and RetryJobs), in order."""
    bulk_calls = ("admin.cancel_jobs", "admin.retry_jobs")
    return [c.args for c in fake.calls if c.method in bulk_calls]


def run(command: str, fake: FakeJobService, *argv: str) -> tuple[Exit, str]:
    args = parse([command, *argv])
    out = io.StringIO()
    status = asyncio.run(args.run(args, fake.client(), out))
    return status, out.getvalue()


JOBS = [f"job-{i}" for i in range(5)]


def test_the_options_make_the_selection() -> None:
    admin = fleet(JOBS)
    run(
        "cancel-many",
        admin,
        "--type",
        "synthetic",
        "--status",
        "queued",
        "--queue",
        "ai-batch",
        "--user-filter",
        "u1",
        "--created-after",
        "2030-01-01T00:00:00Z",
        "--target-type",
        "doc",
        "--dry-run",
    )
    [call] = calls(admin)
    selection = call["selection"]
    assert (selection.job_type, selection.status, selection.queue, selection.user_id) == (
        "synthetic",
        job_pb2.JOB_STATUS_QUEUED,
        "ai-batch",
        "u1",
    )
    assert selection.created_after.ToJsonString() == "2030-01-01T00:00:00Z"
    assert not selection.HasField("created_before")
    assert selection.target_type == "doc"
    ids = fleet(JOBS)
    whole = ["0190f3c2-7a1b-7000-8000-00000000000a", "0190f3c2-7a1b-7000-8000-00000000000b"]
    run("retry-many", ids, "--id", whole[0], "--id", whole[1], "--dry-run")
    assert list(calls(ids)[0]["selection"].job_ids) == whole


def test_ids_may_be_short() -> None:
    whole = [f"0190f3c2-7a1b-7000-8000-{n:012x}" for n in (10, 11)]
    admin = fleet(whole)

    run("cancel-many", admin, "--id", whole[1][-8:], "--id", whole[0], "--dry-run")

    assert list(calls(admin)[0]["selection"].job_ids) == [whole[1], whole[0]]


def test_no_selection_is_a_usage_error_and_nothing_is_sent() -> None:
    admin = fleet(JOBS)
    with pytest.raises(UsageError, match="name the jobs"):
        run("cancel-many", admin, "--yes")
    assert calls(admin) == []


def test_dry_run_only_counts_and_names_the_first_jobs_by_short_id() -> None:
    admin = fleet(JOBS)
    status, out = run("cancel-many", admin, "--type", "t", "--dry-run")
    assert status == Exit.OK
    assert out.splitlines() == [
        "5 jobs match; cancelled none (dry run)",
        "  job-0  job-1  job-2  job-3",
        "  job-4",
    ]
    assert [c["dry_run"] for c in calls(admin)] == [True]


def test_a_dry_run_over_many_jobs_names_the_first_and_counts_the_rest() -> None:
    many = [f"0190f3c2-7a1b-7000-8000-{n:012x}" for n in range(45)]
    status, out = run("retry-many", fleet(many, FAILED), "--status", "failed", "--dry-run")
    assert status == Exit.OK
    head, *names, rest = out.splitlines()
    assert head == "45 jobs match; retried none (dry run)"
    shown = " ".join(names).split()
    assert shown == [job_id[-8:] for job_id in many[: bulk.SAMPLE]]
    assert rest == f"  and {45 - bulk.SAMPLE} more"


def test_one_job_is_one_job() -> None:
    _, out = run("cancel-many", fleet(["job-0"]), "--type", "t", "--dry-run")
    assert out.splitlines()[0] == "1 job matches; cancelled none (dry run)"
    _, done = run("cancel-many", fleet(["job-0"]), "--type", "t", "--yes")
    assert done.strip() == "cancelled 1 job (0 already finished, left)"
    _, retried = run("retry-many", fleet(["job-0"], FAILED), "--status", "failed", "--yes")
    assert retried.strip() == "retried 1 job as a new job (0 refused)"


def test_user_names_one_users_jobs_as_user_filter_did() -> None:
    for option in ("--user", "--user-filter"):
        admin = fleet(JOBS)
        run("cancel-many", admin, option, "learner-3", "--dry-run")
        assert calls(admin)[0]["selection"].user_id == "learner-3"


def test_a_declined_confirmation_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(bulk, "confirmed", lambda q: asked.append(q) or False)
    admin = fleet(JOBS)
    status, out = run("cancel-many", admin, "--type", "t")
    assert (status, out) == (Exit.NOT_CONFIRMED, "")
    assert asked == ["Cancel 5 jobs?"]
    assert [c["dry_run"] for c in calls(admin)] == [True]  # counted, nothing cancelled


def test_cancel_follows_the_continuation_with_progress(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = fleet(JOBS)
    status, out = run("cancel-many", admin, "--type", "t", "--limit", "2", "--yes", "--reason", "r")
    assert status == Exit.OK
    assert out.strip() == "cancelled 5 jobs (0 already finished, left)"
    pages = calls(admin)[1:]
    assert [(c["limit"], c["reason"], c["dry_run"]) for c in pages] == [(2, "r", False)] * 3
    tokens = [c["page_token"] for c in pages]
    assert tokens[0] == "" and all(tokens[1:]) and len(set(tokens)) == 3
    progress = capsys.readouterr().err.splitlines()
    assert progress == [
        "jobctl: cancelled 2/5 (0 already finished)",
        "jobctl: cancelled 4/5 (0 already finished)",
        "jobctl: cancelled 5/5 (0 already finished)",
    ]
    _, as_json = run("cancel-many", fleet(JOBS), "--type", "t", "--yes", "-o", "json")
    assert json.loads(as_json)["job_ids"] == JOBS
    _, lines = run(
        "cancel-many", fleet(JOBS), "--type", "t", "--yes", "--limit", "3", "-o", "jsonl"
    )
    assert [len(json.loads(line)["job_ids"]) for line in lines.splitlines()] == [3, 2]


def test_retry_names_each_refusal_and_exits_6(capsys: pytest.CaptureFixture[str]) -> None:
    admin = fleet(JOBS, FAILED, refuse={"job-3"})
    status, out = run("retry-many", admin, "--status", "failed", "--yes", "--limit", "2")
    assert status == Exit.REFUSED
    assert out.strip() == "retried 4 jobs as new jobs (1 refused)"
    err = capsys.readouterr().err
    assert "  job-3: LIVE_CHILD_EXISTS: the parent already has a t child" in err
    clean_status, _ = run("retry-many", fleet(JOBS, FAILED), "--status", "failed", "--yes")
    assert clean_status == Exit.OK


def test_nothing_matched_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "confirmed", lambda q: pytest.fail("asked"))
    status, out = run("retry-many", fleet([], FAILED), "--status", "failed")
    assert (status, out.strip()) == (Exit.OK, "no jobs match; nothing retried")
