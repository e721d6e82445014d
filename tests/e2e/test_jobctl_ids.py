"""Naming a job in ``jobctl`` as installed, against the real job service: short ids (the
last 8 characters, as ``list`` shows them) wherever a JOB_ID is taken, and another user's
job reached with an admin token and no flags. Helpers: tests/e2e/test_jobctl.py.
(Without the service: tests/unit/test_jobctl_lookup.py.)"""

from __future__ import annotations

import asyncpg

from shared.pb.jobs.v1 import job_service_pb2 as jpb
from tests.e2e.test_jobctl import fields, jobctl, rows
from tests.support.stack import ADMIN_TOKEN, CLIENT_TOKEN, Client

USER = "cli-user"  # jobctl's user in these tests (tests.e2e.test_jobctl.jobctl_env)


async def test_forty_jobs_created_together_list_forty_short_ids_and_each_names_its_job(
    target: str, client: Client
) -> None:
    batch = jpb.CreateJobsRequest(
        requests=[
            jpb.CreateJobRequest(
                user_id=USER,
                job_type="synthetic",
                idempotency_key=f"together-{n}",
            )
            for n in range(40)
        ]
    )
    made = await client.jobs.CreateJobs(batch)
    ids = [r.response.job.id for r in made.results]
    assert len(set(ids)) == 40
    # the ids' first 8 characters (their creation time) do not tell these jobs apart
    assert len({i[:8] for i in ids}) <= 2

    listed = await jobctl(target, "list", "--limit", "40")

    assert listed.status == 0, listed.err
    header, *table = rows(listed.out)
    assert header[0] == "ID"
    short = [row[0] for row in table]
    assert len(short) == len(set(short)) == 40
    assert set(short) == {i[-8:] for i in ids}
    # the short id a person copies from the table names its job
    picked = ids[17]
    got = await jobctl(target, "get", picked[-8:])
    assert got.status == 0, got.err
    assert fields(got.out)["id"] == picked
    as_json = await jobctl(target, "get", picked[-8:], "-o", "json")
    assert as_json.json()["id"] == picked
    # scripts keep the whole ids
    assert {
        j["id"]
        for j in (await jobctl(target, "list", "--limit", "40", "-o", "json")).json()["jobs"]
    } == set(ids)


async def theirs(client: Client, user_id: str = "learner-3") -> str:
    """A job of another user, waiting an hour (cancellable, nothing runs it)."""
    created = await client.jobs.CreateJob(
        jpb.CreateJobRequest(user_id=user_id, job_type="synthetic", idempotency_key=user_id)
    )
    return str(created.job.id)


async def test_an_admin_token_gets_cancels_and_watches_another_users_job_without_flags(
    target: str, client: Client, db: asyncpg.Connection
) -> None:
    job_id = await theirs(client)

    got = await jobctl(target, "get", job_id, "--token", ADMIN_TOKEN)

    assert got.status == 0, got.err
    shown = fields(got.out)
    assert (shown["id"], shown["user"], shown["status"]) == (job_id, "learner-3", "queued")
    assert f"job {job_id[-8:]} belongs to user 'learner-3'" in got.err
    by_short = await jobctl(target, "get", job_id[-8:], "--token", ADMIN_TOKEN)
    assert fields(by_short.out)["id"] == job_id

    cancelled = await jobctl(target, "cancel", job_id[-8:], "--token", ADMIN_TOKEN)

    assert cancelled.status == 0, cancelled.err
    assert cancelled.out.split() == [job_id, "cancelled"]
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "cancelled"
    watched = await jobctl(target, "watch", job_id[-8:], "--token", ADMIN_TOKEN)
    assert watched.status == 5, watched.err  # it ended cancelled
    assert watched.out.split()[1] == "cancelled"


async def test_without_the_admin_role_another_users_job_is_not_found_and_says_for_whom(
    target: str, client: Client, db: asyncpg.Connection
) -> None:
    job_id = await theirs(client)

    for command in ("get", "cancel", "watch"):
        for given in (job_id, job_id[-8:]):
            run = await jobctl(target, command, given, "--token", CLIENT_TOKEN)
            assert run.status == 3, (command, run.err)
            assert f"no job {given} for user 'cli-user'" in run.err
            assert "--user <its owner>" in run.err
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "queued"
    # naming the owner works with the client role too
    owned = await jobctl(target, "get", job_id[-8:], "--user", "learner-3", "--token", CLIENT_TOKEN)
    assert owned.status == 0, owned.err


async def test_an_id_nobody_has_and_a_malformed_one_say_so(target: str, client: Client) -> None:
    job_id = await theirs(client)
    # 8 hex digits that differ from the only job's last 8 in every place
    nobody = "".join("1" if c == "0" else "0" for c in job_id[-8:])

    missing = await jobctl(target, "get", nobody)

    assert (missing.status, missing.out) == (3, "")
    assert f"no job {nobody} (looked among every user's jobs)" in missing.err
    malformed = await jobctl(target, "get", "1a2b")
    assert malformed.status == 2
    assert "last 6 to 32 hex digits" in malformed.err


async def test_list_filters_work_for_an_admin_and_are_refused_otherwise(
    target: str, client: Client
) -> None:
    mine = (await jobctl(target, "create", "synthetic", "--delay", "1h", "--json")).json()["job"]
    other = await theirs(client)

    created = await jobctl(target, "list", "--status", "created")

    assert created.status == 0, created.err
    assert [row[0] for row in rows(created.out)[1:]] == [mine["id"][-8:]]
    queued = rows((await jobctl(target, "list", "--status", "queued")).out)
    assert queued == [["no", "jobs"]]  # the other user's queued job is not the user's
    everyone = rows((await jobctl(target, "list", "--all-users", "--status", "queued")).out)
    assert everyone[0][:2] == ["ID", "USER"]
    assert [row[:2] for row in everyone[1:]] == [[other[-8:], "learner-3"]]
    refused = await jobctl(target, "list", "--status", "failed", "--token", CLIENT_TOKEN)
    assert refused.status == 2
    assert "--type, --status and --queue filter through AdminService" in refused.err


async def test_an_admin_with_no_jobs_of_their_own_is_told_what_to_add(
    target: str, client: Client
) -> None:
    await theirs(client)

    empty = await jobctl(target, "list", "--user", "root")

    assert (empty.status, empty.out.strip()) == (0, "no jobs")
    assert "user 'root' has no jobs; other users do: add --all-users" in empty.err
