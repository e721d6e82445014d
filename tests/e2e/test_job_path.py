"""The whole job path with a real worker: gRPC → PostgreSQL → outbox → JetStream → worker →
LockJobs → execution → SubmitResults, on real PostgreSQL and NATS."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid

import asyncpg
from nats.aio.client import Client as NatsClient

from job_service.app import JobServiceApp
from jobtypes import synthetic
from shared.constants import MSG_ID_HEADER, dispatch_subject
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.registry import Registry
from tests.support.stack import Client, open_channel, settings, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp

S = job_pb2


async def finished(client: Client, job_id: str, timeout: float = 15.0) -> job_pb2.Job:
    async def terminal() -> job_pb2.Job | None:
        job = await client.get(job_id)
        terminal_states = (S.JOB_STATUS_SUCCEEDED, S.JOB_STATUS_FAILED, S.JOB_STATUS_CANCELLED)
        return job if job.status in terminal_states else None

    return await eventually(terminal, timeout=timeout, message=f"job {job_id} did not finish")


async def test_a_job_runs_end_to_end(
    client: Client, worker: WorkerApp, nats_client: NatsClient
) -> None:
    events: asyncio.Queue[dict] = asyncio.Queue()

    async def on_event(msg) -> None:  # type: ignore[no-untyped-def]
        await events.put(json.loads(msg.data))

    await nats_client.subscribe("jobs.events.synthetic.>", cb=on_event)
    created = await client.create(sleep_ms=20, output_bytes=5)

    job = await finished(client, created.job.id)

    assert job.status == S.JOB_STATUS_SUCCEEDED
    assert job.attempt_count == 1
    assert dict(job.output) == {"attempt": 1, "data": "xxxxx"}
    assert job.output_hash and job.progress == 1
    assert [(a.artifact_type, a.artifact_id) for a in job.artifacts] == [
        ("synthetic_result", f"syn_{job.id}")
    ]
    assert [e.to_status for e in job.events] == [
        S.JOB_STATUS_QUEUED,
        S.JOB_STATUS_RUNNING,
        S.JOB_STATUS_SUCCEEDED,
    ]
    assert job.started_at.ToDatetime() <= job.finished_at.ToDatetime()
    event = await asyncio.wait_for(events.get(), 5)
    assert event == {"job_id": job.id, "job_type": "synthetic", "status": "succeeded"}


async def test_retryable_failures_are_retried_until_success(
    client: Client, worker: WorkerApp
) -> None:
    created = await client.create(fail="retryable", fail_times=2)

    job = await finished(client, created.job.id)

    assert job.status == S.JOB_STATUS_SUCCEEDED
    assert job.attempt_count == 3
    assert dict(job.output)["attempt"] == 3
    assert [e.to_status for e in job.events] == [
        S.JOB_STATUS_QUEUED,
        S.JOB_STATUS_RUNNING,
        S.JOB_STATUS_RETRYING,
        S.JOB_STATUS_RUNNING,
        S.JOB_STATUS_RETRYING,
        S.JOB_STATUS_RUNNING,
        S.JOB_STATUS_SUCCEEDED,
    ]


async def test_a_fatal_failure_fails_at_once_without_leaking_internals(
    client: Client, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    created = await client.create(fail="fatal")

    job = await finished(client, created.job.id)

    assert job.status == S.JOB_STATUS_FAILED
    assert job.attempt_count == 1
    assert job.error_code == "JOB_REJECTED"
    assert job.error_message == "The job could not be completed with the given input."
    internal = await db.fetchval("SELECT internal_error_message FROM jobs")
    assert "synthetic fatal failure" in internal
    assert "synthetic fatal failure" not in str(job)


async def test_cancelling_a_running_job_stops_it_within_a_second(
    client: Client, worker: WorkerApp
) -> None:
    created = await client.create(fail="hang")
    await eventually(
        lambda: _status_is(client, created.job.id, S.JOB_STATUS_RUNNING),
        message="the job never started",
    )

    started = time.monotonic()
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=created.job.id, user_id="user-1"))
    job = await finished(client, created.job.id, timeout=1.0)

    assert job.status == S.JOB_STATUS_CANCELLED
    assert time.monotonic() - started < 1.0
    assert worker.worker is not None
    await eventually(lambda: worker.worker.running_jobs == 0, message="the attempt kept running")


async def test_the_same_dispatch_delivered_many_times_runs_the_job_once(
    client: Client, worker: WorkerApp, nats_client: NatsClient, db: asyncpg.Connection
) -> None:
    created = await client.create(sleep_ms=300)
    js = nats_client.jetstream()
    payload = json.dumps({"job_id": created.job.id, "attempt": 1}).encode()
    # distinct message ids: JetStream stores every copy, so the worker really gets them
    for _ in range(5):
        await js.publish(
            dispatch_subject("ai-interactive"),
            payload,
            headers={MSG_ID_HEADER: f"duplicate-{uuid.uuid4()}"},
        )

    job = await finished(client, created.job.id)

    assert job.status == S.JOB_STATUS_SUCCEEDED
    assert job.attempt_count == 1
    runs = await db.fetchval("SELECT count(*) FROM job_events WHERE to_status = 'running'")
    assert runs == 1
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 1
    # a late duplicate of a finished job is dropped as well
    await js.publish(dispatch_subject("ai-interactive"), payload)
    await eventually(lambda: _stream_empty(nats_client), message="the duplicate was not consumed")
    assert (await client.get(created.job.id)).attempt_count == 1


async def test_an_attempt_past_its_definition_timeout_is_ended(
    database_url: str, nats_url: str
) -> None:
    quick = dataclasses.replace(synthetic.DEFINITION, timeout_s=1.0, max_attempts=1)
    registry = Registry([quick])
    async with (
        JobServiceApp(settings(database_url, nats_url)) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
        WorkerApp(worker_settings(nats_url, f"127.0.0.1:{app.port}"), registry),
    ):
        client = Client(channel)
        created = await client.create(fail="hang")
        job = await finished(client, created.job.id, timeout=20)

    assert job.status == S.JOB_STATUS_FAILED
    assert job.error_code == "TIMEOUT"


async def _status_is(client: Client, job_id: str, status: int) -> bool:
    return (await client.get(job_id)).status == status


async def _stream_empty(nats_client: NatsClient) -> bool:
    info = await nats_client.jetstream().stream_info("JOBS_DISPATCH")
    return info.state.messages == 0
