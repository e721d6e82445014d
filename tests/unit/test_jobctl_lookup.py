"""Which job a JOB_ID names (``jobctl.lookup``), through the commands that take one, against
a fake client: short ids resolve among the user's jobs, then (with the admin role) among
every user's; another user's job is read as AdminService shows it and acted on for its
owner; what is not found or ambiguous says so. (Against the real service:
tests/e2e/test_jobctl_ids.py.)"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from durable_jobs_client import JobNotFound, JobsError, PermissionDenied
from durable_jobs_client.protos import admin_service_pb2 as apb
from durable_jobs_client.protos import job_pb2, job_service_pb2

from jobctl.__main__ import report
from jobctl.cli import parse
from jobctl.exits import Exit, UsageError

ME = "cli-user"
SUCCEEDED = job_pb2.JOB_STATUS_SUCCEEDED


def jid(tail: str) -> str:
    """A whole id ending in ``tail`` (hex), the same time prefix for all: created together."""
    return f"0190f3c2-7a1b-7000-8000-{tail.rjust(12, '0')}"


def job(tail: str, user_id: str = ME, **fields: Any) -> job_pb2.Job:
    return job_pb2.Job(id=jid(tail), user_id=user_id, job_type="synthetic", **fields)


def ending(jobs: list[job_pb2.Job], digits: str, page_size: int) -> list[job_pb2.Job]:
    return [j for j in jobs if j.id.replace("-", "").endswith(digits)][:page_size]


@dataclass
class FakeAdmin:
    """AdminService over every user's jobs; refuses everything without the admin role."""

    jobs: list[job_pb2.Job]
    allowed: bool = True
    listed: list[dict[str, Any]] = field(default_factory=list)

    def _check(self) -> None:
        if not self.allowed:
            raise PermissionDenied("needs admin", code=grpc.StatusCode.PERMISSION_DENIED)

    async def get_job(self, job_id: str) -> job_pb2.Job:
        self._check()
        for j in self.jobs:
            if j.id == job_id:
                admin_view = job_pb2.Job()
                admin_view.CopyFrom(j)
                admin_view.internal_error_message = "admin detail"
                return admin_view
        raise JobNotFound("no such job", code=grpc.StatusCode.NOT_FOUND)

    async def list_jobs(self, **request: Any) -> apb.AdminListJobsResponse:
        self._check()
        self.listed.append(request)
        found = [
            j for j in self.jobs if not request.get("user_id") or j.user_id == request["user_id"]
        ]
        if request.get("id_suffix"):
            found = ending(found, request["id_suffix"], request["page_size"])
        return apb.AdminListJobsResponse(jobs=found[: request.get("page_size") or 20])


@dataclass
class FakeClient:
    """JobService as ``user_id`` sees it (a user_id given names another user, as an
    admin's token may), over the same jobs as ``admin``."""

    admin: FakeAdmin
    user_id: str = ME
    cancelled: list[tuple[str, str]] = field(default_factory=list)
    watched: list[tuple[str, str]] = field(default_factory=list)
    signalled: list[tuple[str, str]] = field(default_factory=list)

    def _of(self, user_id: str | None) -> list[job_pb2.Job]:
        return [j for j in self.admin.jobs if j.user_id == (user_id or self.user_id)]

    async def get(self, job_id: str, *, user_id: str | None = None) -> job_pb2.Job:
        for j in self._of(user_id):
            if j.id == job_id:
                return j
        raise JobNotFound("no such job", code=grpc.StatusCode.NOT_FOUND)

    async def list_page(self, **request: Any) -> job_service_pb2.ListJobsResponse:
        mine = self._of(None)
        if request.get("id_suffix"):
            mine = ending(mine, request["id_suffix"], request["page_size"])
        return job_service_pb2.ListJobsResponse(jobs=mine)

    async def cancel(self, job_id: str, *, user_id: str | None = None) -> job_pb2.Job:
        found = await self.get(job_id, user_id=user_id)
        self.cancelled.append((job_id, user_id or self.user_id))
        return job_pb2.Job(id=found.id, status=job_pb2.JOB_STATUS_CANCELLED)

    async def signal(self, job_id: str, name: str, payload: Any, **options: Any) -> Any:
        found = await self.get(job_id, user_id=options.get("user_id"))
        self.signalled.append((found.id, options.get("user_id") or self.user_id))
        return job_service_pb2.SendSignalResponse(created=True, signal={"name": name, "seq": 1})

    async def watch(self, job_id: str, **options: Any) -> AsyncIterator[job_pb2.Job]:
        found = await self.get(job_id, user_id=options.get("user_id"))
        self.watched.append((job_id, options.get("user_id") or self.user_id))
        yield job_pb2.Job(id=found.id, status=SUCCEEDED, attempt_count=1)


def fleet(allowed: bool = True) -> FakeClient:
    return FakeClient(
        FakeAdmin(
            [
                job("aaaa11112222", status=SUCCEEDED),
                job("bbbb33334444", user_id="learner-3", status=job_pb2.JOB_STATUS_RUNNING),
                job("cccc55556666", user_id="learner-4"),
                job("dddd55556666", user_id="learner-4"),
            ],
            allowed,
        )
    )


def run(client: FakeClient, *argv: str) -> tuple[Exit, str]:
    args = parse(list(argv))
    out = io.StringIO()
    status = asyncio.run(args.run(args, client, out))
    return status, out.getvalue()


def shown(out: str) -> dict[str, str]:
    return dict(line.split("  ", 1) for line in out.splitlines() if "  " in line)


def test_a_short_id_of_ones_own_job_is_that_job() -> None:
    client = fleet()

    status, out = run(client, "get", "11112222")

    assert status == Exit.OK
    assert shown(out)["id"].strip() == jid("aaaa11112222")
    assert client.admin.listed == []  # found among the user's own: no admin call
    # dashes are ignored, case too
    assert shown(run(client, "get", "1111-2222")[1])["id"].strip() == jid("aaaa11112222")
    assert shown(run(client, "get", "AAAA11112222")[1])["id"].strip() == jid("aaaa11112222")


def test_a_short_id_that_matches_two_jobs_is_ambiguous_and_names_both() -> None:
    with pytest.raises(UsageError) as refused:
        run(fleet(), "get", "55556666")

    message = str(refused.value)
    assert "'55556666' is ambiguous" in message
    assert jid("cccc55556666") in message and jid("dddd55556666") in message
    assert message.endswith("give more characters")
    # more characters tell them apart
    _, out = run(fleet(), "get", "c55556666")
    assert shown(out)["id"].strip() == jid("cccc55556666")


def test_too_few_digits_is_a_usage_error_naming_the_short_form() -> None:
    with pytest.raises(UsageError, match="last 6 to 32 hex digits"):
        run(fleet(), "get", "2222")


def test_an_admin_reads_another_users_job_without_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for given in (jid("bbbb33334444"), "33334444"):
        status, out = run(fleet(), "get", given)

        assert status == Exit.OK
        fields = shown(out)
        assert fields["id"].strip() == jid("bbbb33334444")
        assert fields["user"].strip() == "learner-3"
        assert fields["internal"].strip() == "admin detail"  # the admin view
        assert "job 33334444 belongs to user 'learner-3'; acting on it with the admin role" in (
            capsys.readouterr().err
        )


def test_cancel_watch_and_signal_act_for_the_owner_of_another_users_job() -> None:
    client = fleet()

    status, out = run(client, "cancel", "33334444")

    assert status == Exit.OK
    assert out.split() == [jid("bbbb33334444"), "cancelled"]
    assert client.cancelled == [(jid("bbbb33334444"), "learner-3")]
    assert run(client, "watch", "33334444")[0] == Exit.OK
    assert client.watched == [(jid("bbbb33334444"), "learner-3")]
    status, out = run(client, "signal", "33334444", "approve")
    assert (status, out.strip()) == (Exit.OK, f"sent approve #1 to {jid('bbbb33334444')}")
    assert client.signalled == [(jid("bbbb33334444"), "learner-3")]


def test_without_the_admin_role_another_users_job_is_not_found_for_this_user() -> None:
    client = fleet(allowed=False)

    for given in ("33334444", jid("bbbb33334444")):
        with pytest.raises(JobsError) as refused:
            run(client, "cancel", given)
        assert refused.value.code == grpc.StatusCode.NOT_FOUND
        assert str(refused.value).startswith(f"no job {given} for user 'cli-user'")
        assert "--user <its owner>" in str(refused.value)
        assert report(refused.value) == Exit.NOT_FOUND
    assert client.cancelled == []


def test_an_id_no_user_has_is_not_found_among_every_users() -> None:
    with pytest.raises(JobsError) as refused:
        run(fleet(), "get", "99998888")
    assert str(refused.value) == "no job 99998888 (looked among every user's jobs)"
    assert report(refused.value) == Exit.NOT_FOUND


def test_all_users_and_its_old_name_admin_read_through_adminservice() -> None:
    for flag in ("--all-users", "--admin"):
        client = fleet()
        _, out = run(client, "get", "11112222", flag)
        assert shown(out)["internal"].strip() == "admin detail"
        assert [r["id_suffix"] for r in client.admin.listed] == ["11112222"]


@dataclass
class IgnoringClient(FakeClient):
    """A job service from before ListJobs took ``id_suffix``: it answers the user's jobs."""

    async def list_page(self, **request: Any) -> job_service_pb2.ListJobsResponse:
        return job_service_pb2.ListJobsResponse(jobs=self._of(None))


def test_a_service_that_ignores_the_suffix_still_yields_only_matching_jobs() -> None:
    admin = fleet().admin
    admin.jobs.append(job("eeee77778888"))  # a second job of the user's

    _, out = run(IgnoringClient(admin), "get", "77778888")

    assert shown(out)["id"].strip() == jid("eeee77778888")
