"""JOBS_SERVICE_PROCESSES=2: two job_service processes on one port, each a replica.

``python -m job_service serve`` starts one child of itself; both bind the same gRPC port
(SO_REUSEPORT) and the kernel hands each new connection to one of them. Which one created a
job is in the database: CreateJob's statement claims the job's dispatch row for its own
replica (``outbox_events.locked_by``). The child goes with its parent (SIGTERM), and a
child that dies takes its parent down with it (job_service/processes.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from devstack.embedded.ports import free_port
from shared.grpc_client import aio_channel
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import struct_from_dict
from tests.chaos.cluster import wait_serving
from tests.support.declared import declare_to
from tests.support.processes import JobServiceProcess, client_config
from tests.support.stack import WORKER_TOKEN, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

PARENT = "js-pair"
CHILD = f"{PARENT}-1"  # the parent's instance id with the child's index
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def children_of(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.fixture
async def pair(
    tmp_path: Path, database_url: str, nats_url: str
) -> AsyncIterator[JobServiceProcess]:
    process = JobServiceProcess(
        tmp_path, PARENT, database_url, nats_url, free_port(), JOBS_SERVICE_PROCESSES="2"
    )
    try:
        yield process
    finally:
        for child in children_of(process.pid) if process.process.poll() is None else []:
            with_signal(child, signal.SIGKILL)
        process.close()


def with_signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


async def replicas_connected(db: asyncpg.Connection) -> set[str]:
    rows = await db.fetch(
        "SELECT DISTINCT application_name FROM pg_stat_activity"
        " WHERE application_name LIKE 'job_service %'"
    )
    return {r["application_name"].removeprefix("job_service ") for r in rows}


async def create_on_a_new_connection(target: str) -> str:
    # a pool of its own: channels share a process-wide one otherwise, and one connection
    async with aio_channel(client_config(target), OWN_CONNECTION) as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        response = await stub.CreateJob(
            jpb.CreateJobRequest(
                user_id="pair-user", job_type="synthetic", input=struct_from_dict({})
            )
        )
        return str(response.job.id)


async def test_two_processes_share_one_port_and_each_serves_jobs(
    pair: JobServiceProcess, db: asyncpg.Connection, nats_url: str
) -> None:
    await wait_serving(pair.target, pair)
    await declare_to(pair.target, WORKER_TOKEN)
    await eventually(lambda: _both(db), timeout=30, message="the child replica never connected")
    [child] = children_of(pair.pid)

    creators: dict[str, str | None] = {}

    async def both_created() -> bool:
        job_id = await create_on_a_new_connection(pair.target)
        creators[job_id] = await db.fetchval(
            "SELECT locked_by FROM outbox_events WHERE dedupe_key = $1",
            f"job.dispatch:{job_id}:create",
        )
        # (a dispatch row a pushed grant made unneeded may have no claimant)
        return {PARENT, CHILD} <= set(creators.values())

    # each channel is a new connection: the kernel spreads them over both listeners
    await eventually(both_created, timeout=20, interval=0, message=f"one replica: {creators}")

    async with WorkerApp(worker_settings(nats_url, pair.target, worker_id="pair-worker")):
        await eventually(
            lambda: _succeeded(db, list(creators)),
            timeout=20,
            message="jobs created through both processes did not all run",
        )

    pair.signal(signal.SIGTERM)  # the parent forwards it
    assert await pair.wait(30) == 0
    await eventually(lambda: not Path(f"/proc/{child}").exists(), timeout=10)


async def test_a_child_that_dies_stops_its_parent(
    pair: JobServiceProcess, db: asyncpg.Connection
) -> None:
    await wait_serving(pair.target, pair)
    await eventually(lambda: _both(db), timeout=30, message="the child replica never connected")
    [child] = children_of(pair.pid)

    with_signal(child, signal.SIGKILL)

    assert await pair.wait(30) == 1  # a child killed by a signal: status 1
    assert "replica process 1 exited" in pair.log()


async def _both(db: asyncpg.Connection) -> bool:
    return {PARENT, CHILD} <= await replicas_connected(db)


async def _succeeded(db: asyncpg.Connection, ids: list[str]) -> bool:
    done = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'", ids
    )
    return bool(done == len(ids))
