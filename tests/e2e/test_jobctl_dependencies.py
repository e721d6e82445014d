"""``jobctl create --depends-on`` and ``jobctl tree`` as installed, against a running job
service: two jobs and a join waiting for both, drawn from the join and from a dependency,
before and after one of them ends. No worker: the test ends the dependency itself, as a
worker would (LockJob, SubmitResult)."""

from __future__ import annotations

from shared.pb.jobs.v1 import job_pb2
from tests.e2e.test_jobctl import jobctl
from tests.support.stack import Client, result_request
from tests.support.wait import eventually

USER = "cli-user"  # jobctl's user in these tests (tests.e2e.test_jobctl.jobctl_env)


async def queued(client: Client, job_id: str) -> bool:
    return bool((await client.get(job_id, user_id=USER)).status == job_pb2.JOB_STATUS_QUEUED)


async def test_tree_draws_a_join_and_its_dependencies_from_either_end(
    target: str, client: Client
) -> None:
    a = (await client.create(user_id=USER)).job.id
    b = (await client.create(user_id=USER)).job.id
    made = await jobctl(
        target,
        "create",
        "synthetic",
        "--depends-on",
        a,
        "--depends-on",
        b,
        "--dependency-policy",
        "run",
        "--json",
    )
    assert made.status == 0, made.err
    join = made.json()["job"]
    assert join["status"] == "JOB_STATUS_CREATED"
    assert sorted(join["depends_on"]) == sorted([a, b])
    assert join["dependency_policy"] == "DEPENDENCY_POLICY_RUN"

    async def both_queued() -> bool:
        return await queued(client, a) and await queued(client, b)

    await eventually(both_queued, message="not queued")

    from_join = await jobctl(target, "tree", join["id"])

    assert from_join.status == 0, from_join.err
    first, second = sorted([a, b])  # listed in id order
    assert from_join.out.splitlines() == [
        f"{join['id'][-8:]}  synthetic  created  waits for 2 of 2",
        f"|-- needs      {first[-8:]}  synthetic  queued",
        f"`-- needs      {second[-8:]}  synthetic  queued",
    ]

    lease = await client.lock(a)
    await client.executor.SubmitResult(
        result_request(a, lease.job.lease_token, {"attempt": 1, "data": "x"})
    )
    from_a = await jobctl(target, "tree", a)

    assert from_a.status == 0, from_a.err
    assert from_a.out.splitlines() == [
        f"{a[-8:]}  synthetic  succeeded",
        f"`-- needed by  {join['id'][-8:]}  synthetic  created  waits for 1 of 2",
        f"    `-- needs      {b[-8:]}  synthetic  queued",
    ]
    by_short_id = await jobctl(target, "tree", a[-8:])  # the short id the tree shows
    assert (by_short_id.status, by_short_id.out) == (0, from_a.out)
    as_json = (await jobctl(target, "tree", a, "-o", "json")).json()
    assert [j["id"] for j in as_json["jobs"]] == [a, join["id"], b]
    assert as_json["left_out"]["beyond_max_jobs"] == []


async def test_a_dependency_of_another_user_or_none_is_refused(target: str, client: Client) -> None:
    theirs = (await client.create(user_id="someone-else")).job.id

    refused = await jobctl(target, "create", "synthetic", "--depends-on", theirs)
    missing = await jobctl(target, "tree", "00000000-0000-7000-8000-000000000000")

    assert refused.status == 3, refused.err  # NOT_FOUND: no job of this user
    assert "depends_on" in refused.err or "NOT_FOUND" in refused.err
    assert (missing.status, missing.out) == (3, "")
