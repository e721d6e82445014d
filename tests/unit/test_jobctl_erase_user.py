"""``jobctl erase-user`` against the fake AdminService of ``durable_jobs_client.testing``:
a dry run first (and only, with --dry-run), a confirmation, a refusal while the user's jobs
run unless --cancel-running. (Against the real service: tests/integration/
test_erase_user_data.py has the RPC; this is the command's order and words.)"""

from __future__ import annotations

import asyncio
import io

import pytest
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.testing import FakeJobService

from jobctl.cli import parse
from jobctl.exits import Exit, UsageError

DONE, QUEUED = job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_QUEUED


def service(*statuses: job_pb2.JobStatus) -> FakeJobService:
    fake = FakeJobService()
    fake.put(*(job_pb2.Job(id=f"j{i}", user_id="ada", status=s) for i, s in enumerate(statuses)))
    fake.put(job_pb2.Job(id="other", user_id="bob", status=DONE))
    return fake


def run(fake: FakeJobService, *argv: str) -> tuple[Exit, str]:
    args = parse(["erase-user", *argv])
    out = io.StringIO()
    return asyncio.run(args.run(args, fake.client(), out)), out.getvalue()


def erases(fake: FakeJobService) -> list[bool]:
    """The dry_run flag of each EraseUserData call, in order."""
    return [c.args["dry_run"] for c in fake.calls if c.method == "admin.erase_user_data"]


def test_a_dry_run_counts_and_erases_nothing() -> None:
    fake = service(DONE, DONE)
    status, out = run(fake, "ada", "--dry-run")
    assert status is Exit.OK and "ada: 2 jobs" in out and "dry run" in out
    assert erases(fake) == [True] and len(fake.jobs) == 3


def test_without_a_terminal_or_yes_it_refuses_to_erase() -> None:
    fake = service(DONE)
    with pytest.raises(UsageError, match="--yes"):
        run(fake, "ada")
    assert erases(fake) == [True] and "j0" in fake.jobs


def test_yes_erases_the_users_jobs_only() -> None:
    fake = service(DONE, DONE)
    status, out = run(fake, "ada", "--yes")
    assert status is Exit.OK and out.startswith("erased ada")
    assert erases(fake) == [True, False] and list(fake.jobs) == ["other"]


def test_unfinished_jobs_are_refused_unless_cancel_running() -> None:
    fake = service(DONE, QUEUED)
    status, _ = run(fake, "ada", "--yes")
    assert status is Exit.REFUSED and erases(fake) == [True] and len(fake.jobs) == 3
    status, _ = run(fake, "ada", "--yes", "--cancel-running")
    assert status is Exit.OK and list(fake.jobs) == ["other"]
