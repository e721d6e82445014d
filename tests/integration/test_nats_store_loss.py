"""NATS restarted without its JetStream store (streams, consumers and messages gone): the
job service declares the streams again instead of dead-lettering the outbox, and a worker
declares its consumer again instead of failing every fetch forever."""

from __future__ import annotations

import shutil

import asyncpg

from devstack.embedded import EmbeddedNats
from shared.pb.jobs.v1 import job_pb2
from tests.support.stack import Client, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp


def lose_the_store(server: EmbeddedNats) -> None:
    server.stop()
    shutil.rmtree(server.store_dir / "jetstream")
    server.start()


async def test_the_outbox_declares_the_streams_again_after_nats_lost_its_store(
    client: Client, db: asyncpg.Connection, nats_server: EmbeddedNats
) -> None:
    lose_the_store(nats_server)

    job = (await client.create(sleep_ms=1)).job

    row = await eventually(
        lambda: db.fetchrow(
            "SELECT status, attempt_count FROM outbox_events"
            " WHERE aggregate_id = $1 AND status = 'published'",
            job.id,
        ),
        timeout=10,
        message="the dispatch was never published to the new store",
    )
    assert row["attempt_count"] <= 2  # one try that found no stream, at most
    assert await db.fetchval("SELECT count(*) FROM outbox_events WHERE status = 'dead'") == 0


async def test_a_worker_declares_its_consumer_again_after_nats_lost_its_store(
    client: Client, target: str, nats_server: EmbeddedNats
) -> None:
    settings = worker_settings(nats_server.url, target, worker_id="survivor")
    async with WorkerApp(settings):
        before = (await client.create(sleep_ms=1)).job
        await eventually(
            lambda: job_status(client, before.id, job_pb2.JOB_STATUS_SUCCEEDED), timeout=10
        )
        lose_the_store(nats_server)

        after = (await client.create(sleep_ms=1)).job

        await eventually(
            lambda: job_status(client, after.id, job_pb2.JOB_STATUS_SUCCEEDED),
            timeout=15,
            message="the worker never consumed again",
        )


async def job_status(client: Client, job_id: str, status: int) -> bool:
    return bool((await client.get(job_id)).status == status)
