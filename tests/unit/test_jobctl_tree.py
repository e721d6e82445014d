"""``jobctl tree`` and ``create --depends-on`` against the fake client of
``durable_jobs_client.testing``: the walk (each job
read once, its bounds), the drawing (a job reached twice drawn once, then referenced;
what was left out said), the JSON, and the CreateJobRequest ``--depends-on`` makes.
(Against the real service: tests/e2e/test_jobctl_dependencies.py.)"""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from typing import Any

import pytest
from durable_jobs_client import JobsError
from durable_jobs_client.protos import job_pb2, job_service_pb2
from durable_jobs_client.testing import FakeAsyncJobsClient, FakeJobService

from jobctl.cli import parse
from jobctl.exits import Exit, UsageError
from jobctl.graph import walk
from jobctl.render.detail import job_detail
from jobctl.render.tree import job_tree, short_id

ME = "cli-user"
CREATED = job_pb2.JOB_STATUS_CREATED
RUNNING = job_pb2.JOB_STATUS_RUNNING
SUCCEEDED = job_pb2.JOB_STATUS_SUCCEEDED


def jid(name: str) -> str:
    """A job id whose short form (its last 8 characters) is ``name``, padded with 0."""
    return f"0190f3c2-7a1b-7000-8000-{name.rjust(12, '0')}"


def job(
    name: str,
    status: job_pb2.JobStatus = SUCCEEDED,
    job_type: str = "synthetic",
    **links: Any,
) -> job_pb2.Job:
    """A job named ``name`` whose id lists (``depends_on=["a"]``) name jobs the same way."""
    fields = {k: [jid(n) for n in v] if isinstance(v, list) else v for k, v in links.items()}
    return job_pb2.Job(id=jid(name), user_id=ME, job_type=job_type, status=status, **fields)  # type: ignore[arg-type]


def fake(*jobs: job_pb2.Job) -> FakeAsyncJobsClient:
    """A client of the user the jobs belong to, over a fake job service holding them."""
    service = FakeJobService()
    service.put(*jobs)
    return service.client(user_id=ME)


def reads(client: FakeAsyncJobsClient) -> Counter[str]:
    """How often each job was read (JobService.GetJob)."""
    return Counter(c["job_id"] for c in client.service.asked("get"))


def batches(client: FakeAsyncJobsClient) -> list[list[job_service_pb2.CreateJobRequest]]:
    """The CreateJobs batches sent."""
    return [list(c["requests"]) for c in client.service.asked("create_many")]


def fan_in() -> FakeAsyncJobsClient:
    """a and b, and a join waiting for both (a has ended, b runs)."""
    return fake(
        job("a", dependent_job_ids=["join"], dependents_total=1),
        job("b", RUNNING, dependent_job_ids=["join"], dependents_total=1),
        job(
            "join",
            CREATED,
            job_type="merge",
            depends_on=["a", "b"],
            dependencies_total=2,
            dependencies_pending=1,
            dependency_policy=job_pb2.DEPENDENCY_POLICY_RUN,
        ),
    )


def fan_out() -> FakeAsyncJobsClient:
    """A parent with three children; the third (a join) waits for the first two."""
    return fake(
        job("p", job_type="split", child_job_ids=["c1", "c2", "j"], child_jobs_total=3),
        job("c1", parent_job_id=jid("p"), dependent_job_ids=["j"]),
        job("c2", RUNNING, parent_job_id=jid("p"), dependent_job_ids=["j"]),
        job(
            "j",
            CREATED,
            job_type="merge",
            parent_job_id=jid("p"),
            depends_on=["c1", "c2"],
            dependencies_total=2,
            dependencies_pending=1,
        ),
    )


async def tree_of(jobs: FakeAsyncJobsClient, root: str, **bounds: int) -> str:
    return job_tree(await walk(jobs.get, jid(root), **bounds))


async def test_a_join_lists_what_it_waits_for_and_a_dependency_what_waits_for_it() -> None:
    jobs = fan_in()

    assert await tree_of(jobs, "join") == "\n".join(
        [
            "0000join  merge  created  waits for 1 of 2",
            "|-- needs      0000000a  synthetic  succeeded",
            "`-- needs      0000000b  synthetic  running",
        ]
    )
    # From a dependency: the join, and under it its other dependency; not "needs a" again.
    assert await tree_of(jobs, "a") == "\n".join(
        [
            "0000000a  synthetic  succeeded",
            "`-- needed by  0000join  merge  created  waits for 1 of 2",
            "    `-- needs      0000000b  synthetic  running",
        ]
    )


async def test_a_join_reached_from_several_jobs_is_drawn_once_then_referenced() -> None:
    jobs = fan_out()

    drawn = await tree_of(jobs, "p")

    assert drawn == "\n".join(
        [
            "0000000p  split  succeeded",
            "|-- child      000000c1  synthetic  succeeded",
            "|   `-- needed by  0000000j  (see below)",
            "|-- child      000000c2  synthetic  running",
            "|   `-- needed by  0000000j  (see below)",
            "`-- child      0000000j  merge  created  waits for 1 of 2",
            "    |-- needs      000000c1  (see above)",
            "    `-- needs      000000c2  (see above)",
        ]
    )
    assert set(reads(jobs).values()) == {1}  # each job read once
    assert sum(line.endswith("waits for 1 of 2") for line in drawn.splitlines()) == 1


async def test_a_child_names_its_parent_and_is_not_walked_up_to_it() -> None:
    drawn = await tree_of(fan_out(), "c1")

    assert drawn.splitlines()[0] == "000000c1  synthetic  succeeded  (child of 0000000p)"
    assert "0000000p" not in "".join(drawn.splitlines()[1:])


async def test_the_bounds_say_what_they_left_out() -> None:
    chain = fake(*(job(f"n{i}", child_job_ids=[f"n{i + 1}"]) for i in range(6)), job("n6"))
    shallow = await tree_of(chain, "n0", depth=2)
    assert shallow.splitlines()[-2:] == [
        "        `-- ... 1 more not shown",
        "(3 jobs shown; left out: 1 jobs deeper than --depth 2)",
    ]
    assert reads(chain)[jid("n3")] == 0

    wide = fake(job("p", child_job_ids=[f"c{i}" for i in range(10)], child_jobs_total=1500))
    wide.service.put(*(job(f"c{i}") for i in range(10)))
    capped = await tree_of(wide, "p", max_jobs=4)
    assert capped.splitlines()[-2:] == [
        "`-- ... 1497 more not shown",
        "(4 jobs shown; left out: 7 jobs past --max-jobs 4, "
        "1490 links the service does not list (the first 1000 each))",
    ]
    assert sum(reads(wide).values()) == 4


async def test_a_job_not_found_is_named_and_the_first_job_not_found_is_the_error() -> None:
    jobs = fan_in()
    del jobs.service.jobs[jid("b")]  # deleted by retention

    drawn = await tree_of(jobs, "join")

    assert drawn.splitlines()[-1] == "`-- needs      0000000b  (not found)"
    with pytest.raises(JobsError):
        await tree_of(jobs, "b")


def run(client: FakeAsyncJobsClient, *argv: str) -> tuple[Exit, str]:
    args = parse(list(argv))
    out = io.StringIO()
    status = asyncio.run(args.run(args, client, out))
    return status, out.getvalue()


def test_tree_for_scripts_gives_whole_ids_and_what_was_left_out() -> None:
    status, out = run(fan_in(), "tree", jid("join"), "-o", "json")

    assert status == Exit.OK
    answer = json.loads(out)
    assert [j["id"] for j in answer["jobs"]] == [jid("join"), jid("a"), jid("b")]
    assert answer["jobs"][0]["dependencies_pending"] == 1
    assert answer["jobs"][0]["dependency_policy"] == "DEPENDENCY_POLICY_RUN"
    assert answer["left_out"] == {"beyond_depth": [], "beyond_max_jobs": [], "unlisted_links": 0}
    _, lines = run(fan_in(), "tree", jid("a"), "-o", "jsonl")
    assert [json.loads(line)["status"] for line in lines.splitlines()] == [
        "JOB_STATUS_SUCCEEDED",
        "JOB_STATUS_CREATED",
        "JOB_STATUS_RUNNING",
    ]


def test_depends_on_and_the_policy_go_into_the_request() -> None:
    client = fan_in()

    status, out = run(
        client,
        "create",
        "merge",
        "-i",
        '{"k": 1}',
        "--depends-on",
        jid("a"),
        "--depends-on",
        jid("b"),
        "--dependency-policy",
        "cancel",
        "--key",
        "k1",
    )

    assert status == Exit.OK and out.startswith("created\n")
    [[request]] = batches(client)
    assert list(request.depends_on) == [jid("a"), jid("b")]
    assert request.dependency_policy == job_pb2.DEPENDENCY_POLICY_CANCEL
    assert (request.user_id, request.job_type, request.idempotency_key) == (
        "cli-user",
        "merge",
        "k1",
    )
    assert request.input["k"] == 1


def test_depends_on_takes_short_ids_of_the_users_jobs() -> None:
    client = fan_in()

    status, _ = run(client, "create", "merge", "--depends-on", "0000000b", "--depends-on", jid("a"))

    assert status == Exit.OK
    [[request]] = batches(client)
    assert list(request.depends_on) == [jid("b"), jid("a")]


@pytest.mark.parametrize(
    "argv",
    [
        ["--dependency-policy", "run"],
        ["--depends-on", "x", "--delay", "5m"],
        ["--depends-on", "x", "--run-at", "2030-01-31T09:00:00Z"],
    ],
)
def test_dependency_options_that_make_no_sense_are_refused_before_any_call(
    argv: list[str],
) -> None:
    client = fan_in()
    with pytest.raises(UsageError):
        run(client, "create", "merge", *argv)
    assert batches(client) == []


def test_a_short_id_is_the_end_of_the_id_where_jobs_created_together_differ() -> None:
    assert short_id("0190f3c2-7a1b-7000-8000-0123456789ab") == "456789ab"


def test_get_shows_what_a_job_depends_on_its_policy_and_its_dependents() -> None:
    waiting = job(
        "j",
        CREATED,
        depends_on=["a", "b"],
        dependencies_total=3,
        dependency_policy=job_pb2.DEPENDENCY_POLICY_CANCEL,
        dependent_job_ids=["z"],
        dependents_total=1,
    )

    lines = dict(line.split("  ", 1) for line in job_detail(waiting).splitlines())

    assert lines["depends on"].strip() == f"{jid('a')} {jid('b')} (+1 more)"
    assert lines["if one fails"].strip() == "cancel"
    assert lines["dependents"].strip() == jid("z")
