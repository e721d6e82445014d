"""Which job a JOB_ID names (``jobctl.lookup``), through the commands that take one, against
the fake client of ``durable_jobs_client.testing``: short ids resolve among the user's jobs,
then (with the admin role) among every user's; another user's job is read as AdminService
shows it and acted on for its owner; what is not found or ambiguous says so. (Against the
real service: tests/e2e/test_jobctl_ids.py.)"""

from __future__ import annotations

import asyncio
import io
from typing import Any

import grpc
import pytest
from durable_jobs_client import JobsError, PermissionDenied
from durable_jobs_client.protos import job_pb2, job_service_pb2
from durable_jobs_client.testing import FakeAsyncJobsClient, FakeJobService

from jobctl.__main__ import report
from jobctl.cli import parse
from jobctl.exits import Exit, UsageError

ME = "cli-user"
SUCCEEDED = job_pb2.JOB_STATUS_SUCCEEDED


def jid(tail: str) -> str:
    """A whole id ending in ``tail`` (hex), the same time prefix for all: created together."""
    return f"0190f3c2-7a1b-7000-8000-{tail.rjust(12, '0')}"


def job(tail: str, user_id: str = ME, **fields: Any) -> job_pb2.Job:
    """A job as stored, with what only AdminService shows (its internal error message)."""
    return job_pb2.Job(
        id=jid(tail),
        user_id=user_id,
        job_type="synthetic",
        internal_error_message="admin detail",
        **fields,
    )


def fleet(allowed: bool = True) -> FakeAsyncJobsClient:
    """A client acting as ME over four jobs of three users; without the admin role
    AdminService refuses every call."""
    service = FakeJobService()
    service.put(
        job("aaaa11112222", status=SUCCEEDED),
        job("bbbb33334444", user_id="learner-3", status=job_pb2.JOB_STATUS_RUNNING),
        job("cccc55556666", user_id="learner-4"),
        job("dddd55556666", user_id="learner-4"),
    )
    if not allowed:
        refused = PermissionDenied("needs admin", code=grpc.StatusCode.PERMISSION_DENIED)
        service.refuse("admin.*", refused)
    return service.client(user_id=ME)


def listed(client: FakeAsyncJobsClient) -> list[dict[str, Any]]:
    """The AdminService.ListJobs requests jobctl made."""
    return client.service.asked("admin.list_jobs")


def acted(client: FakeAsyncJobsClient, method: str) -> list[tuple[str, str]]:
    """Which job each call of ``method`` named, and for which user."""
    return [(c["job_id"], c["user_id"] or ME) for c in client.service.asked(method)]


def run(client: FakeAsyncJobsClient, *argv: str) -> tuple[Exit, str]:
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
    assert listed(client) == []  # found among the user's own: no admin call
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

    status, out = run(client, "signal", "33334444", "approve")
    assert (status, out.strip()) == (Exit.OK, f"sent approve #1 to {jid('bbbb33334444')}")
    assert acted(client, "signal") == [(jid("bbbb33334444"), "learner-3")]
    status, out = run(client, "cancel", "33334444")

    assert status == Exit.OK
    assert out.split() == [jid("bbbb33334444"), "cancel_requested"]  # it was running
    assert acted(client, "cancel") == [(jid("bbbb33334444"), "learner-3")]
    client.service.update(jid("bbbb33334444"), status=job_pb2.JOB_STATUS_CANCELLED)  # stopped
    assert run(client, "watch", "33334444")[0] == Exit.JOB_CANCELLED
    assert acted(client, "watch") == [(jid("bbbb33334444"), "learner-3")]


def test_without_the_admin_role_another_users_job_is_not_found_for_this_user() -> None:
    client = fleet(allowed=False)

    for given in ("33334444", jid("bbbb33334444")):
        with pytest.raises(JobsError) as refused:
            run(client, "cancel", given)
        assert refused.value.code == grpc.StatusCode.NOT_FOUND
        assert str(refused.value).startswith(f"no job {given} for user 'cli-user'")
        assert "--user <its owner>" in str(refused.value)
        assert report(refused.value) == Exit.NOT_FOUND
    assert client.service.jobs[jid("bbbb33334444")].status == job_pb2.JOB_STATUS_RUNNING


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
        assert [r["id_suffix"] for r in listed(client)] == ["11112222"]


def test_a_service_that_ignores_the_suffix_still_yields_only_matching_jobs() -> None:
    client = fleet()
    client.service.put(job("eeee77778888"))  # a second job of the user's

    def ignoring(**_: Any) -> job_service_pb2.ListJobsResponse:
        """A job service from before ListJobs took ``id_suffix``: the user's jobs."""
        mine = [j for j in client.service.jobs.values() if j.user_id == ME]
        return job_service_pb2.ListJobsResponse(jobs=mine)

    client.service.on("list_page", ignoring)
    _, out = run(client, "get", "77778888")

    assert shown(out)["id"].strip() == jid("eeee77778888")
