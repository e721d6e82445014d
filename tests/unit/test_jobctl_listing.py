"""``jobctl list`` and the options every command shares, against the fake client of
tests/unit/test_jobctl_lookup.py: short ids in the table, filters that work or are
refused (never ignored), what an empty listing says to an admin, one spelling per idea
(``--all-users``; ``--admin`` and ``--user-filter`` kept hidden), ``--yes`` everywhere."""

from __future__ import annotations

import pytest
from durable_jobs_client.protos import job_pb2

from jobctl.cli import build_parser, parse
from jobctl.exits import Exit, UsageError
from jobctl.render import jobs_table
from tests.unit.test_jobctl_lookup import fleet, jid, job, listed, run


def test_the_table_shows_short_ids_that_tell_jobs_created_together_apart() -> None:
    # 40 jobs created in the same millisecond share their first 13 hex digits
    together = [job(f"{n:012x}") for n in range(40)]

    rows = jobs_table(together).splitlines()[1:]

    short = [row.split()[0] for row in rows]
    assert len(set(short)) == 40
    assert short == [j.id[-8:] for j in together]
    whole = [row.split()[0] for row in jobs_table(together, whole_ids=True).splitlines()[1:]]
    assert whole == [j.id for j in together]


def test_list_all_users_shows_every_users_jobs_with_their_users() -> None:
    for flag in ("--all-users", "--admin"):
        status, out = run(fleet(), "list", flag)
        assert status == Exit.OK
        header, *rows = [line.split() for line in out.splitlines()]
        assert header[:3] == ["ID", "USER", "TYPE"]
        assert {row[1] for row in rows} == {"cli-user", "learner-3", "learner-4"}


def test_a_filter_lists_the_users_own_jobs_through_adminservice() -> None:
    client = fleet()

    status, _ = run(client, "list", "--status", "running")

    assert status == Exit.OK
    [request] = listed(client)
    assert (request["user_id"], request["status"]) == ("cli-user", job_pb2.JOB_STATUS_RUNNING)
    assert run(fleet(), "list", "--status", "running", "--all-users")[0] == Exit.OK


def test_a_filter_without_the_admin_role_is_refused_not_ignored() -> None:
    with pytest.raises(UsageError, match="--type, --status and --queue filter through"):
        run(fleet(allowed=False), "list", "--status", "failed")


def test_user_filter_still_lists_one_users_jobs() -> None:
    client = fleet()
    _, out = run(client, "list", "--user-filter", "learner-4")
    assert listed(client)[0]["user_id"] == "learner-4"
    assert {line.split()[1] for line in out.splitlines()[1:]} == {"learner-4"}


def test_an_empty_listing_tells_an_admin_what_to_add(capsys: pytest.CaptureFixture[str]) -> None:
    nobody = fleet().service.client(user_id="root")

    status, out = run(nobody, "list")

    assert (status, out.strip()) == (Exit.OK, "no jobs")
    err = capsys.readouterr().err
    assert "user 'root' has no jobs; other users do: add --all-users" in err
    run(fleet(allowed=False).service.client(user_id="root"), "list")
    assert capsys.readouterr().err == ""  # not an admin: nothing to suggest


def test_old_spellings_stay_hidden_from_help() -> None:
    helps = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command in ("list", "get", "tree"):
        text = helps[command].format_help()
        assert "--all-users" in text
        assert "--admin" not in text and "--user-filter" not in text


@pytest.mark.parametrize(
    "argv",
    [
        ["pause", "q", "--yes"],
        ["resume", "q", "--yes"],
        ["cancel", jid("1"), "-y"],
        ["schedule", "pause", "s", "--yes"],
        ["schedule", "resume", "s", "--yes"],
        ["schedule", "delete", "s", "--yes"],
        ["credentials", "delete", "c", "--yes"],
        ["cancel-many", "--type", "t", "--yes"],
        ["--yes", "retry-many", "--type", "t"],
    ],
)
def test_yes_is_accepted_by_every_command(argv: list[str]) -> None:
    assert parse(argv).yes is True
