"""Fan-in across processes (issue 30): two job_service replicas and two worker processes,
each worker on its own replica, against one PostgreSQL and one NATS. A join over 200 jobs
that finish at once, their completions counted by the trigger in transactions of both
replicas and the join made due by whichever replica's resolver takes the release, runs
exactly once, after the last of them; joins attached while their dependencies are ending
(the attach racing the trigger) count each dependency once and run once as well. Every
claim is read from the database: attempts, timeline, edges, releases, dispatch rows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from devstack.embedded.ports import free_port
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.processes import JobServiceProcess, ServiceProcess, WorkerProcess
from tests.support.stack import Client, open_channel
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

USER = "fan-in-user"
RUN = job_pb2.DEPENDENCY_POLICY_RUN
REPLICA_ENV = {
    # 200 unfinished jobs of one user at once: over the default limit of 100
    "JOBS_MAX_ACTIVE_JOBS_PER_USER": "0",
    "JOBS_SHUTDOWN_DELAY_S": "0",
    "JOBS_OUTBOX_POLL_INTERVAL_S": "0.2",
}
JOIN_DEADLINE_S = 60.0


@dataclass
class Replica:
    process: JobServiceProcess
    client: Client


@dataclass
class Stack:
    """Replicas A and B; worker ``worker-a`` talks to A only, ``worker-b`` to B only."""

    a: Replica
    b: Replica
    workers: tuple[WorkerProcess, WorkerProcess]

    def logs(self) -> str:
        processes = [self.a.process, self.b.process, *self.workers]
        return "\n".join(f"--- {p.log_path.name}\n{p.log()[-4000:]}" for p in processes)


@pytest.fixture
async def stack(
    tmp_path: Path, database_url: str, nats_url: str, db: asyncpg.Connection
) -> AsyncIterator[Stack]:
    """Two replicas and two workers as separate processes, once each worker holds a
    session on its own replica (so the jobs created next start together, not as the
    workers come up); killed afterwards."""
    started: list[ServiceProcess] = []
    try:
        replicas = []
        for name in "ab":
            replica = JobServiceProcess(
                tmp_path, f"js-{name}", database_url, nats_url, free_port(), **REPLICA_ENV
            )
            started.append(replica)
            replicas.append(replica)
        workers = []
        for name, replica in zip("ab", replicas, strict=True):
            worker = WorkerProcess(tmp_path, f"worker-{name}", nats_url, replica.target)
            started.append(worker)
            workers.append(worker)
        for worker, replica in zip(workers, replicas, strict=True):
            await eventually(
                lambda w=worker, r=replica: _session_on(db, w.worker_id, r.instance_id),  # type: ignore[misc]
                timeout=30,
                interval=0.1,
                message=f"{worker.worker_id} has no session on {replica.instance_id}",
            )
        async with (
            open_channel(replicas[0].target) as to_a,
            open_channel(replicas[1].target) as to_b,
        ):
            yield Stack(
                Replica(replicas[0], Client(to_a)),
                Replica(replicas[1], Client(to_b)),
                (workers[0], workers[1]),
            )
    finally:
        for process in started:
            process.close()


def synthetic(
    sleep_ms: int,
    depends_on: Sequence[str] = (),
    policy: job_pb2.DependencyPolicy = job_pb2.DEPENDENCY_POLICY_UNSPECIFIED,
) -> jpb.CreateJobRequest:
    return jpb.CreateJobRequest(
        user_id=USER,
        job_type="synthetic",
        input=struct_from_dict({"sleep_ms": sleep_ms}),
        depends_on=depends_on,
        dependency_policy=policy,
    )


async def create_many(replica: Replica, sleeps_ms: list[int]) -> list[str]:
    """One CreateJobs of synthetic jobs sleeping ``sleeps_ms``: their ids."""
    answer = await replica.client.jobs.CreateJobs(
        jpb.CreateJobsRequest(requests=[synthetic(ms) for ms in sleeps_ms])
    )
    refused = [r.error.message for r in answer.results if r.HasField("error")]
    assert not refused, f"CreateJobs refused {len(refused)}: {refused[0]}"
    return [r.response.job.id for r in answer.results]


async def create_join(replica: Replica, depends_on: list[str]) -> Any:
    """A synthetic join over ``depends_on`` (policy RUN): the job as CreateJob answered."""
    answer = await replica.client.jobs.CreateJob(synthetic(0, depends_on, RUN))
    return answer.job


async def test_a_join_over_200_children_finishing_at_once_on_two_replicas_runs_exactly_once(
    stack: Stack, db: asyncpg.Connection
) -> None:
    # created half through each replica, in one call each, both calls at once
    halves = await asyncio.gather(
        create_many(stack.a, [1000] * 100), create_many(stack.b, [1000] * 100)
    )
    children = [job_id for half in halves for job_id in half]
    join = await create_join(stack.b, children)
    assert join.status == job_pb2.JOB_STATUS_CREATED
    assert (join.dependencies_total, join.dependencies_pending) == (200, 200)

    started = time.monotonic()
    await _wait_succeeded(db, stack, [join.id])
    print(f"join succeeded {time.monotonic() - started:.2f} s after it was created")

    # the children ran at once on both workers (more than one worker's 128 slots), so
    # their ends were written through both replicas (each worker talks to one)
    ran_on = await db.fetch(
        "SELECT worker_id, count(*) AS n FROM job_events"
        " WHERE job_id = ANY($1::uuid[]) AND to_status = 'running' GROUP BY worker_id",
        children,
    )
    window_s = await db.fetchval(
        "SELECT extract(epoch FROM max(finished_at) - min(finished_at)) FROM jobs"
        " WHERE id = ANY($1::uuid[])",
        children,
    )
    print(
        "children run by",
        {r["worker_id"]: r["n"] for r in ran_on},
        f"finished within {float(window_s):.3f} s",
    )
    assert {r["worker_id"] for r in ran_on} == {"worker-a", "worker-b"}
    await _assert_ran_once_after(db, join.id, children)


async def test_a_join_created_while_its_dependencies_finish_counts_each_once(
    stack: Stack, db: asyncpg.Connection
) -> None:
    # finishing over about a second and a half, from the first start on
    sleeps = [15 * n for n in range(100)]
    halves = await asyncio.gather(
        create_many(stack.a, sleeps[::2]), create_many(stack.b, sleeps[1::2])
    )
    children = [job_id for half in halves for job_id in half]
    await eventually(
        lambda: _succeeded(db, children),
        timeout=20,
        interval=0.01,
        message="no dependency finished",
    )

    replicas = [stack.a, stack.b, stack.a, stack.b, stack.a]
    joins = await asyncio.gather(*(create_join(r, children) for r in replicas))

    at_attach = [j.dependencies_pending for j in joins]
    print("pending when each join was attached:", at_attach)
    assert all(j.dependencies_total == 100 for j in joins)
    # the attach raced the completions: some had ended, some had not
    assert any(0 < pending < 100 for pending in at_attach), at_attach
    started = time.monotonic()
    await _wait_succeeded(db, stack, [j.id for j in joins])
    print(f"5 joins succeeded {time.monotonic() - started:.2f} s after they were created")
    for join in joins:
        await _assert_ran_once_after(db, join.id, children)


async def _assert_ran_once_after(db: asyncpg.Connection, join_id: str, children: list[str]) -> None:
    """The join ran once, after the last of ``children`` finished, every edge counted once
    as succeeded, nothing left to count, one dispatch row."""
    job = await db.fetchrow(
        "SELECT status, attempt_count, started_at, dependencies_uncounted FROM jobs WHERE id = $1",
        join_id,
    )
    assert job is not None
    assert (job["status"], job["attempt_count"], job["dependencies_uncounted"]) == (
        "succeeded",
        1,
        0,
    ), dict(job)
    running = await db.fetch(
        "SELECT created_at FROM job_events WHERE job_id = $1 AND to_status = 'running'", join_id
    )
    assert len(running) == 1, running
    last_child = await db.fetchrow(
        "SELECT count(*) AS n, count(*) FILTER (WHERE status = 'succeeded') AS succeeded,"
        " max(finished_at) AS finished_at FROM jobs WHERE id = ANY($1::uuid[])",
        children,
    )
    assert last_child is not None
    assert (last_child["n"], last_child["succeeded"]) == (len(children), len(children))
    assert job["started_at"] >= last_child["finished_at"]
    assert running[0]["created_at"] >= last_child["finished_at"]
    edges = await db.fetch(
        "SELECT ended_status, count(*) AS n, count(ended_at) AS stamped,"
        " count(*) FILTER (WHERE counted) AS counted FROM job_dependencies"
        " WHERE job_id = $1 GROUP BY ended_status",
        join_id,
    )
    assert [tuple(e) for e in edges] == [("succeeded", *[len(children)] * 3)]
    dispatches = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE event_type = 'job.dispatch'"
        " AND aggregate_id = $1",
        join_id,
    )
    assert dispatches == 1
    after_s = (job["started_at"] - last_child["finished_at"]).total_seconds()
    print(f"join {join_id} started {after_s:.3f} s after its last dependency finished")


async def _wait_succeeded(db: asyncpg.Connection, stack: Stack, job_ids: list[str]) -> None:
    """Until every one of ``job_ids`` has succeeded; on the deadline, the statuses of the
    jobs and the processes' logs in the failure."""

    async def all_succeeded() -> bool:
        n = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'",
            job_ids,
        )
        return bool(n == len(job_ids))

    try:
        await eventually(all_succeeded, timeout=JOIN_DEADLINE_S, interval=0.05)
    except AssertionError:
        rows = await db.fetch(
            "SELECT id, status, attempt_count, dependencies_uncounted, error_code FROM jobs"
            " WHERE id = ANY($1::uuid[])",
            job_ids,
        )
        raise AssertionError(
            f"joins not succeeded: {[dict(r) for r in rows]}\n{stack.logs()}"
        ) from None


async def _succeeded(db: asyncpg.Connection, job_ids: list[str]) -> int:
    n: int = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'", job_ids
    )
    return n


async def _session_on(db: asyncpg.Connection, worker_id: str, instance_id: str) -> bool:
    return bool(
        await db.fetchval(
            "SELECT count(*) FROM worker_sessions WHERE worker_id = $1 AND instance_id = $2"
            " AND closed_at IS NULL",
            worker_id,
            instance_id,
        )
    )
