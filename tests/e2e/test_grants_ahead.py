"""Grants ahead (ADR 0009), seen where users see them: a job created while a worker waits
reaches it down its session with no dispatch message published, and results are answered
with the next jobs (lock on submit). Every job still runs once: one attempt each, one
result. Real PostgreSQL, NATS and worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from nats.aio.client import Client as NatsClient
from prometheus_client import REGISTRY

from shared.constants import DISPATCH_STREAM
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.stack import Client, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp

SUCCEEDED = job_pb2.JOB_STATUS_SUCCEEDED


def granted_ahead(path: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "jobs_grants_ahead_total", {"queue": "ai-interactive", "path": path}
        )
        or 0.0
    )


async def dispatches_published(nats: NatsClient) -> int:
    """The dispatch stream's last sequence: every message ever published to it."""
    return int((await nats.jetstream().stream_info(DISPATCH_STREAM)).state.last_seq)


async def all_succeeded(db: asyncpg.Connection, ids: list[str]) -> list[asyncpg.Record]:
    async def done() -> list[asyncpg.Record] | None:
        rows = await db.fetch(
            "SELECT id::text, status, attempt_count FROM jobs WHERE id = ANY($1::uuid[])", ids
        )
        return rows if all(r["status"] == "succeeded" for r in rows) else None

    return await eventually(done, timeout=20, message="the jobs did not all succeed")


@pytest.fixture
async def waiting_worker(nats_url: str, target: str) -> AsyncIterator[WorkerApp]:
    """A worker with one interactive slot whose session is open (its slots reported), that
    asks for the next jobs with its results (lock on submit, opt-in)."""
    settings = worker_settings(
        nats_url,
        target,
        worker_id="ahead-worker",
        worker_slots="ai-interactive=1",
        worker_lock_on_submit=True,
    )
    async with WorkerApp(settings) as app:
        assert app.worker is not None and app.worker.session is not None
        await asyncio.wait_for(app.worker.session.opened.wait(), 10)
        yield app


async def test_a_job_created_while_a_worker_waits_is_pushed_not_published(
    client: Client, waiting_worker: WorkerApp, nats_client: NatsClient, db: asyncpg.Connection
) -> None:
    published, pushed = await dispatches_published(nats_client), granted_ahead("pushed")

    created = await client.create(sleep_ms=1)
    [job] = await all_succeeded(db, [created.job.id])

    assert job["attempt_count"] == 1
    assert granted_ahead("pushed") == pushed + 1
    assert await dispatches_published(nats_client) == published


async def test_results_are_answered_with_the_next_jobs_and_each_job_runs_once(
    client: Client, waiting_worker: WorkerApp, db: asyncpg.Connection
) -> None:
    on_submit = granted_ahead("on_submit")
    answer = await client.jobs.CreateJobs(
        jpb.CreateJobsRequest(
            requests=[
                jpb.CreateJobRequest(
                    user_id="user-1",
                    job_type="synthetic",
                    # long enough that the jobs behind are a backlog by the time each
                    # result asks (lock on submit takes jobs due for BACKLOG_AFTER_S)
                    input=struct_from_dict({"sleep_ms": 300}),
                )
                for _ in range(6)
            ]
        )
    )
    ids = [r.response.job.id for r in answer.results]

    jobs = await all_succeeded(db, ids)

    assert [j["attempt_count"] for j in jobs] == [1] * 6
    # one slot: the first job is pushed, the next comes with a work token (a full fetch:
    # the queue is backed up); each result then asks for the next one
    assert granted_ahead("on_submit") > on_submit
    results = await db.fetchval(
        "SELECT count(*) FROM job_events"
        " WHERE job_id = ANY($1::uuid[]) AND to_status = 'succeeded'",
        ids,
    )
    assert results == 6
