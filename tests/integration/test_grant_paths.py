"""Worker versions on every path a job is granted or explained by: LockJob by id (as well as
a queue's tokens), the hold AdminService.GetJob explains, the jobs_waiting_without_worker
gauge, and ListQueues' eligible count. Against real PostgreSQL and NATS, driven as a raw
gRPC worker drives them."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import asyncpg
import pytest
from prometheus_client import REGISTRY

from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.constants import Queue
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.registry import Registry
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.wait import eventually

INTERACTIVE, BACKGROUND = Queue.INTERACTIVE.value, Queue.BACKGROUND.value
# A job type of the background queue, which the test's worker never claims from.
BACKGROUND_TYPE = dataclasses.replace(SYNTHETIC, job_type="background", queue=Queue.BACKGROUND)
LOADED = ["synthetic@1.0.0", "background@1.0.0"]
NO_JOB = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
async def client(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    async with (
        running_job_service(
            database_url,
            nats_url,
            Registry([SYNTHETIC, BACKGROUND_TYPE]),
            lease_ttl_s=600,
            metrics_collect_interval_s=0.2,
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Client(channel)


async def claim(client: Client, queue: str, worker: str, runnable: list[str]) -> None:
    await client.executor.LockJobs(
        epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=NO_JOB, worker_id=worker)],
            queue=queue,
            runnable_definitions=runnable,
        )
    )


async def test_lock_jobs_by_id_grants_only_a_definition_version_the_worker_runs(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job

    old = await client.executor.LockJobs(
        epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=job.id, worker_id="old")],
            runnable_definitions=["synthetic@0.9"],
        )
    )
    status_meanwhile = await db.fetchval("SELECT status FROM jobs WHERE id = $1", job.id)
    new = await client.executor.LockJobs(
        epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=job.id, worker_id="new")],
            runnable_definitions=LOADED,
        )
    )

    # handed back for a worker that runs the version, not granted and not dropped
    [refused] = old.responses
    assert refused.outcome == epb.LOCK_OUTCOME_NOT_DUE and refused.HasField("retry_after")
    assert status_meanwhile == "queued"
    assert [r.outcome for r in new.responses] == [epb.LOCK_OUTCOME_LOCKED]
    assert await db.fetchval("SELECT locked_by FROM jobs WHERE id = $1", job.id) == "new"


async def test_lock_job_names_the_definitions_its_worker_runs(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job

    old = await client.executor.LockJob(
        epb.LockJobRequest(job_id=job.id, worker_id="old", runnable_definitions=["synthetic@0.9"])
    )
    new = await client.executor.LockJob(
        epb.LockJobRequest(job_id=job.id, worker_id="new", runnable_definitions=LOADED)
    )

    assert old.outcome == epb.LOCK_OUTCOME_NOT_DUE and old.HasField("retry_after")
    assert new.outcome == epb.LOCK_OUTCOME_LOCKED
    assert await db.fetchval("SELECT locked_by FROM jobs WHERE id = $1", job.id) == "new"


async def test_a_job_of_a_queue_no_worker_claims_from_is_held_for_want_of_a_worker(
    client: Client, db: asyncpg.Connection
) -> None:
    """The only worker has loaded both job types but claims from the interactive queue
    alone: a background job is run by no one, however its version matches."""
    await claim(client, INTERACTIVE, "w1", LOADED)
    job = (await client.create(job_type="background")).job

    hold = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job.hold
    counted = await eventually(
        lambda: REGISTRY.get_sample_value("jobs_waiting_without_worker") == 1, timeout=10
    )

    assert hold.reason == job_pb2.JobHold.REASON_NO_WORKER_FOR_VERSION
    assert hold.key == "background@1.0.0"
    assert counted
    # a worker of the background queue lifts the hold
    await claim(client, BACKGROUND, "w3", LOADED)
    hold = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job.hold
    assert hold.reason in (job_pb2.JobHold.REASON_READY, job_pb2.JobHold.REASON_UNSPECIFIED)
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job.id) == "running"


async def test_a_worker_that_claims_from_two_queues_is_recorded_for_both(
    client: Client, db: asyncpg.Connection
) -> None:
    await claim(client, INTERACTIVE, "w1", LOADED)
    await claim(client, BACKGROUND, "w1", ["background@2.0"])
    recorded = await db.fetchval(
        "SELECT definitions FROM worker_definitions WHERE worker_id = 'w1'"
    )
    assert sorted(recorded) == ["background@2.0", "synthetic@1.0.0"]


async def test_list_queues_counts_no_job_of_a_paused_queue_as_eligible(client: Client) -> None:
    await client.create()
    await client.create()
    await client.admin.PauseQueue(apb.PauseQueueRequest(queue=INTERACTIVE))

    paused = {q.name: q for q in (await client.admin.ListQueues(apb.ListQueuesRequest())).queues}
    await client.admin.ResumeQueue(apb.ResumeQueueRequest(queue=INTERACTIVE))
    resumed = {q.name: q for q in (await client.admin.ListQueues(apb.ListQueuesRequest())).queues}

    assert (paused[INTERACTIVE].waiting, paused[INTERACTIVE].eligible) == (2, 0)
    assert (resumed[INTERACTIVE].waiting, resumed[INTERACTIVE].eligible) == (2, 2)
