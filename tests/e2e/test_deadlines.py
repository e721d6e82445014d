"""Job deadlines (issue 45) on a worker process whose queue has 1 slot
(``tests/support/deadline_jobtypes.py``), over real PostgreSQL and NATS: a job that retries
forever, one whose attempt never ends and one asleep each end FAILED with
DEADLINE_EXCEEDED within 1 s of their deadline (CreateJob's, or the type's default); the
running attempt is stopped (the one slot runs the next job), and its worker's late writes
change nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import Registry, default_registry
from tests.support.deadline_jobtypes import NAPPER_DEADLINE_S
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

MODULES = "tests.support.deadline_jobtypes"
REGISTRY: Registry = default_registry({"JOBS_JOB_TYPE_MODULES": MODULES})
SpawnWorker = Callable[..., WorkerProcess]
# how late after its deadline a job may end (the keeper runs every 0.25 s)
BOUND_S = 1.0


@pytest.fixture
async def target(database_url: str, nats_url: str) -> AsyncIterator[str]:
    async with running_job_service(database_url, nats_url, REGISTRY) as app:
        yield f"127.0.0.1:{app.port}"


async def create(
    client: Client, job_type: str, deadline: datetime | None = None, **job_input: Any
) -> job_pb2.Job:
    request = jpb.CreateJobRequest(
        user_id="user-1", job_type=job_type, input=struct_from_dict(job_input)
    )
    if deadline is not None:
        stamp = Timestamp()
        stamp.FromDatetime(deadline)
        request.deadline.CopyFrom(stamp)
    return (await client.jobs.CreateJob(request)).job


async def ended(db: asyncpg.Connection, job_id: str, timeout: float) -> asyncpg.Record:
    """The job's row once it has finished."""
    await eventually(
        lambda: db.fetchval("SELECT finished_at IS NOT NULL FROM jobs WHERE id = $1", job_id),
        timeout=timeout,
        message=f"job {job_id} did not end",
    )
    row = await db.fetchrow(
        "SELECT status, error_code, deadline_at, finished_at, attempt_count FROM jobs"
        " WHERE id = $1",
        job_id,
    )
    assert row is not None
    return row


def assert_ended_by_deadline(row: asyncpg.Record) -> None:
    assert (row["status"], row["error_code"]) == ("failed", "DEADLINE_EXCEEDED")
    late = (row["finished_at"] - row["deadline_at"]).total_seconds()
    assert 0 <= late <= BOUND_S, f"ended {late:.2f}s after its deadline"


async def test_a_job_retrying_forever_ends_deadline_exceeded_within_a_second_of_it(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    spawn_worker("deadlines", JOBS_JOB_TYPE_MODULES=MODULES)
    deadline = datetime.now(UTC) + timedelta(seconds=4)
    job = await create(client, "flaky", deadline)
    assert job.deadline.ToDatetime(tzinfo=UTC) == deadline  # shown as asked

    row = await ended(db, job.id, timeout=15)
    assert_ended_by_deadline(row)
    assert row["attempt_count"] >= 2, "it should have been retrying until its deadline"
    shown = (await client.jobs.GetJob(jpb.GetJobRequest(job_id=job.id, user_id="user-1"))).job
    assert shown.status == job_pb2.JOB_STATUS_FAILED
    assert shown.error_code == "DEADLINE_EXCEEDED"
    assert shown.error_message == "The job did not finish by its deadline."
    reasons = [e.reason for e in shown.events]
    assert reasons[-1] == "DEADLINE_EXCEEDED"


async def test_a_running_attempt_is_stopped_at_its_deadline_and_its_slot_freed(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    spawn_worker("deadlines", JOBS_JOB_TYPE_MODULES=MODULES)
    job = await create(client, "stuck", datetime.now(UTC) + timedelta(seconds=4))
    await eventually(
        lambda: db.fetchval("SELECT status = 'running' FROM jobs WHERE id = $1", job.id),
        timeout=10,
        message="the stuck job did not start",
    )
    after = await create(client, "quick")  # waits for the one slot

    row = await ended(db, job.id, timeout=15)
    assert_ended_by_deadline(row)
    event = await db.fetchrow(
        "SELECT from_status, worker_id FROM job_events WHERE job_id = $1"
        " AND reason = 'DEADLINE_EXCEEDED'",
        job.id,
    )
    assert event is not None and event["from_status"] == "running"
    assert event["worker_id"] == "deadlines"
    # the attempt was stopped: the queue's one slot runs the job created after it
    await eventually(
        lambda: db.fetchval("SELECT status = 'succeeded' FROM jobs WHERE id = $1", after.id),
        timeout=10,
        message="the slot the stuck job held was not freed",
    )
    # and the stopped attempt's worker wrote nothing over the deadline's end
    assert await db.fetchval(
        "SELECT status = 'failed' AND error_code = 'DEADLINE_EXCEEDED' FROM jobs WHERE id = $1",
        job.id,
    )


async def test_a_sleeping_job_ends_at_its_types_default_deadline(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    spawn_worker("deadlines", JOBS_JOB_TYPE_MODULES=MODULES)
    job = await create(client, "napper", seconds=60)
    default = job.deadline.ToDatetime(tzinfo=UTC) - job.created_at.ToDatetime(tzinfo=UTC)
    assert abs(default.total_seconds() - NAPPER_DEADLINE_S) < 0.5
    await eventually(
        lambda: db.fetchval(
            "SELECT error_code = 'SUSPENDED_SLEEP' FROM jobs WHERE id = $1", job.id
        ),
        timeout=10,
        message="the napper did not fall asleep",
    )
    row = await ended(db, job.id, timeout=15)
    assert_ended_by_deadline(row)
    assert (
        await db.fetchval(
            "SELECT from_status FROM job_events WHERE job_id = $1 AND reason = 'DEADLINE_EXCEEDED'",
            job.id,
        )
        == "retrying"
    )


async def test_a_job_finished_before_its_deadline_keeps_its_outcome(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    spawn_worker("deadlines", JOBS_JOB_TYPE_MODULES=MODULES)
    deadline = datetime.now(UTC) + timedelta(seconds=2)
    job = await create(client, "quick", deadline)
    row = await ended(db, job.id, timeout=10)
    assert row["status"] == "succeeded"
    # past the deadline, a finished job is left as it is
    await eventually(
        lambda: db.fetchval("SELECT now() > $1::timestamptz + interval '0.5 s'", deadline),
        timeout=5,
        message="the deadline did not pass",
    )
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job.id) == "succeeded"
