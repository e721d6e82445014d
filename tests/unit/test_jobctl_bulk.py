"""``cancel-many`` / ``retry-many`` against a fake AdminService client: the selection the
options make, the count-confirm-loop order, progress, the formats and the exit statuses.
(Against the real service: tests/e2e/test_jobctl_bulk.py.)"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from durable_jobs_client.protos import admin_service_pb2 as apb
from durable_jobs_client.protos import job_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from jobctl.cli import parse
from jobctl.commands import bulk
from jobctl.exits import Exit, UsageError


@dataclass
class FakeAdmin:
    """Pages through ``jobs`` ``limit`` at a time; the token is the next index."""

    jobs: list[str]
    refuse: set[str] = field(default_factory=set)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def _page(self, request: dict[str, Any]) -> tuple[list[str], str]:
        self.calls.append(request)
        start = int(request["page_token"] or 0)
        end = start + (request["limit"] or 100)
        return self.jobs[start:end], str(end) if end < len(self.jobs) else ""

    def _dry_page(self, selection: apb.JobSelection, request: dict[str, Any]) -> list[str]:
        """A dry run names the jobs of the first page it would act on."""
        self.calls.append({"dry_run": True, "selection": selection})
        return self.jobs[: request.get("limit") or 100]

    async def list_jobs(self, **request: Any) -> apb.AdminListJobsResponse:
        """AdminService.ListJobs by id suffix, over ``jobs``."""
        found = [j for j in self.jobs if j.replace("-", "").endswith(request["id_suffix"])]
        return apb.AdminListJobsResponse(jobs=[job_pb2.Job(id=j) for j in found])

    async def cancel_jobs(self, selection: apb.JobSelection, **request: Any) -> Any:
        if request.get("dry_run"):
            page = self._dry_page(selection, request)
            return apb.CancelJobsResponse(matched=len(self.jobs), cancelled=len(page), job_ids=page)
        page, token = self._page(request)
        return apb.CancelJobsResponse(cancelled=len(page), job_ids=page, next_page_token=token)

    async def retry_jobs(self, selection: apb.JobSelection, **request: Any) -> Any:
        if request.get("dry_run"):
            page = self._dry_page(selection, request)
            outcomes = [apb.RetryJobOutcome(job_id=job_id) for job_id in page]
            return apb.RetryJobsResponse(matched=len(self.jobs), outcomes=outcomes)
        page, token = self._page(request)
        outcomes = [outcome(job_id, job_id in self.refuse) for job_id in page]
        retried = sum(1 for o in outcomes if o.new_job_id)
        return apb.RetryJobsResponse(retried=retried, outcomes=outcomes, next_page_token=token)


def outcome(job_id: str, refused: bool) -> apb.RetryJobOutcome:
    if not refused:
        return apb.RetryJobOutcome(job_id=job_id, new_job_id=f"new-{job_id}")
    status = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message="a live child exists")
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason="LIVE_CHILD_EXISTS"))
    return apb.RetryJobOutcome(job_id=job_id, status=status)


@dataclass
class FakeClient:
    admin: FakeAdmin


def run(command: str, admin: FakeAdmin, *argv: str) -> tuple[Exit, str]:
    args = parse([command, *argv])
    out = io.StringIO()
    status = asyncio.run(args.run(args, FakeClient(admin), out))
    return status, out.getvalue()


JOBS = [f"job-{i}" for i in range(5)]


def test_the_options_make_the_selection() -> None:
    admin = FakeAdmin(JOBS)
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
    [call] = admin.calls
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
    ids = FakeAdmin(JOBS)
    whole = ["0190f3c2-7a1b-7000-8000-00000000000a", "0190f3c2-7a1b-7000-8000-00000000000b"]
    run("retry-many", ids, "--id", whole[0], "--id", whole[1], "--dry-run")
    assert list(ids.calls[0]["selection"].job_ids) == whole


def test_ids_may_be_short() -> None:
    whole = [f"0190f3c2-7a1b-7000-8000-{n:012x}" for n in (10, 11)]
    admin = FakeAdmin(whole)

    run("cancel-many", admin, "--id", whole[1][-8:], "--id", whole[0], "--dry-run")

    assert list(admin.calls[0]["selection"].job_ids) == [whole[1], whole[0]]


def test_no_selection_is_a_usage_error_and_nothing_is_sent() -> None:
    admin = FakeAdmin(JOBS)
    with pytest.raises(UsageError, match="name the jobs"):
        run("cancel-many", admin, "--yes")
    assert admin.calls == []


def test_dry_run_only_counts_and_names_the_first_jobs_by_short_id() -> None:
    admin = FakeAdmin(JOBS)
    status, out = run("cancel-many", admin, "--type", "t", "--dry-run")
    assert status == Exit.OK
    assert out.splitlines() == [
        "5 jobs match; cancelled none (dry run)",
        "  job-0  job-1  job-2  job-3",
        "  job-4",
    ]
    assert [c.get("dry_run") for c in admin.calls] == [True]


def test_a_dry_run_over_many_jobs_names_the_first_and_counts_the_rest() -> None:
    many = [f"0190f3c2-7a1b-7000-8000-{n:012x}" for n in range(45)]
    status, out = run("retry-many", FakeAdmin(many), "--status", "failed", "--dry-run")
    assert status == Exit.OK
    head, *names, rest = out.splitlines()
    assert head == "45 jobs match; retried none (dry run)"
    shown = " ".join(names).split()
    assert shown == [job_id[-8:] for job_id in many[: bulk.SAMPLE]]
    assert rest == f"  and {45 - bulk.SAMPLE} more"


def test_one_job_is_one_job() -> None:
    _, out = run("cancel-many", FakeAdmin(["job-0"]), "--type", "t", "--dry-run")
    assert out.splitlines()[0] == "1 job matches; cancelled none (dry run)"
    _, done = run("cancel-many", FakeAdmin(["job-0"]), "--type", "t", "--yes")
    assert done.strip() == "cancelled 1 job (0 already finished, left)"
    _, retried = run("retry-many", FakeAdmin(["job-0"]), "--status", "failed", "--yes")
    assert retried.strip() == "retried 1 job as a new job (0 refused)"


def test_user_names_one_users_jobs_as_user_filter_did() -> None:
    for option in ("--user", "--user-filter"):
        admin = FakeAdmin(JOBS)
        run("cancel-many", admin, option, "learner-3", "--dry-run")
        assert admin.calls[0]["selection"].user_id == "learner-3"


def test_a_declined_confirmation_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(bulk, "confirmed", lambda q: asked.append(q) or False)
    admin = FakeAdmin(JOBS)
    status, out = run("cancel-many", admin, "--type", "t")
    assert (status, out) == (Exit.NOT_CONFIRMED, "")
    assert asked == ["Cancel 5 jobs?"]
    assert [c.get("dry_run") for c in admin.calls] == [True]  # counted, nothing cancelled


def test_cancel_follows_the_continuation_with_progress(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = FakeAdmin(JOBS)
    status, out = run("cancel-many", admin, "--type", "t", "--limit", "2", "--yes", "--reason", "r")
    assert status == Exit.OK
    assert out.strip() == "cancelled 5 jobs (0 already finished, left)"
    pages = admin.calls[1:]
    assert [(c["page_token"], c["limit"], c["reason"]) for c in pages] == [
        ("", 2, "r"),
        ("2", 2, "r"),
        ("4", 2, "r"),
    ]
    progress = capsys.readouterr().err.splitlines()
    assert progress == [
        "jobctl: cancelled 2/5 (0 already finished)",
        "jobctl: cancelled 4/5 (0 already finished)",
        "jobctl: cancelled 5/5 (0 already finished)",
    ]
    _, as_json = run("cancel-many", FakeAdmin(JOBS), "--type", "t", "--yes", "-o", "json")
    assert json.loads(as_json)["job_ids"] == JOBS
    _, lines = run(
        "cancel-many", FakeAdmin(JOBS), "--type", "t", "--yes", "--limit", "3", "-o", "jsonl"
    )
    assert [len(json.loads(line)["job_ids"]) for line in lines.splitlines()] == [3, 2]


def test_retry_names_each_refusal_and_exits_6(capsys: pytest.CaptureFixture[str]) -> None:
    admin = FakeAdmin(JOBS, refuse={"job-3"})
    status, out = run("retry-many", admin, "--status", "failed", "--yes", "--limit", "2")
    assert status == Exit.REFUSED
    assert out.strip() == "retried 4 jobs as new jobs (1 refused)"
    err = capsys.readouterr().err
    assert "  job-3: LIVE_CHILD_EXISTS: a live child exists" in err.splitlines()
    clean_status, _ = run("retry-many", FakeAdmin(JOBS), "--status", "failed", "--yes")
    assert clean_status == Exit.OK


def test_nothing_matched_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "confirmed", lambda q: pytest.fail("asked"))
    status, out = run("retry-many", FakeAdmin([]), "--status", "failed")
    assert (status, out.strip()) == (Exit.OK, "no jobs match; nothing retried")
