"""The dispatch reconciler: a waiting job whose dispatch message NATS lost (a store lost, a
stream purged) is dispatched again, once, whichever replica notices; a job whose dispatch
is still in the outbox is left to the dispatcher."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest
from nats.aio.client import Client as NatsClient

from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.adapters.postgres.pool import create_pool
from shared.constants import DISPATCH_STREAM, dispatch_subject
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.wait import eventually

# reconcile quickly: a dispatch published 0.5 s ago and not acted on counts as lost
QUICK = {"reconcile_after_s": 0.5, "reconcile_interval_s": 0.1}
# never on its own: the test calls the reconciler's query itself
NEVER = {"reconcile_after_s": 3600.0, "reconcile_interval_s": 3600.0}


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, 4)
    try:
        yield pool
    finally:
        await pool.close()


async def dispatch_rows(db: asyncpg.Connection, job_id: str) -> list[asyncpg.Record]:
    return await db.fetch(
        "SELECT dedupe_key, status FROM outbox_events"
        " WHERE aggregate_id = $1 AND event_type = 'job.dispatch' ORDER BY id",
        job_id,
    )


async def published(db: asyncpg.Connection, job_id: str, count: int) -> bool:
    rows = await dispatch_rows(db, job_id)
    return len(rows) == count and all(r["status"] == "published" for r in rows)


async def messages_for(nc: NatsClient, queue: str) -> list[str]:
    """The job ids of the dispatch messages waiting in the stream for ``queue``."""
    sub = await nc.jetstream().pull_subscribe(dispatch_subject(queue), stream=DISPATCH_STREAM)
    try:
        messages = await sub.fetch(10, timeout=1.0)
    except TimeoutError:
        return []
    finally:
        await sub.unsubscribe()
    return [json.loads(m.data)["job_id"] for m in messages]


async def test_a_queued_job_whose_dispatch_message_was_lost_is_dispatched_again(
    database_url: str, nats_url: str, nats_client: NatsClient, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url, **QUICK) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        job = (await Client(channel).create(sleep_ms=1)).job
        await eventually(lambda: published(db, job.id, 1), message="never published")
        await nats_client.jetstream().purge_stream(DISPATCH_STREAM)  # the message is lost

        await eventually(
            lambda: published(db, job.id, 2), timeout=10, message="never dispatched again"
        )

        assert [m for m in await messages_for(nats_client, job.queue)] == [job.id]
    rows = await dispatch_rows(db, job.id)
    assert rows[1]["dedupe_key"].startswith(f"job.dispatch:{job.id}:redispatch:")
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job.id) == "queued"


async def test_a_retrying_job_whose_dispatch_message_was_lost_is_dispatched_again(
    database_url: str, nats_url: str, nats_client: NatsClient, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url, **QUICK) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        job = (await client.create(sleep_ms=1)).job
        lease = await client.lock(job.id)
        await client.executor.SubmitFailure(
            epb.SubmitFailureRequest(
                job_id=job.id, lease_token=lease.job.lease_token, error_code="PROVIDER_TIMEOUT"
            )
        )
        await eventually(lambda: published(db, job.id, 2), message="retry never published")
        await nats_client.jetstream().purge_stream(DISPATCH_STREAM)

        await eventually(
            lambda: published(db, job.id, 3), timeout=10, message="never dispatched again"
        )

        assert await messages_for(nats_client, job.queue) == [job.id]
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job.id) == "retrying"


async def test_a_job_whose_dispatch_is_still_in_the_outbox_is_left_to_the_dispatcher(
    database_url: str, nats_url: str, pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url, **NEVER) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        job = (await Client(channel).create(sleep_ms=1)).job
        await eventually(lambda: published(db, job.id, 1), message="never published")
    repository = OutboxRepository(pool)
    await db.execute("UPDATE jobs SET updated_at = now() - interval '1 minute'")
    # as if NATS had been unreachable: the dispatch waits in the outbox
    await db.execute("UPDATE outbox_events SET status = 'pending', available_at = 'infinity'")

    assert await repository.redispatch_stranded(30, 100) == 0

    await db.execute("UPDATE outbox_events SET status = 'published'")
    assert await repository.redispatch_stranded(30, 100) == 1
    # re-dispatched just now: not again for another 30 s
    await db.execute("UPDATE outbox_events SET status = 'published'")
    assert await repository.redispatch_stranded(30, 100) == 0
    assert len(await dispatch_rows(db, job.id)) == 2


async def test_two_replicas_reconciling_at_once_dispatch_each_stranded_job_once(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url, **NEVER) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        jobs = [(await client.create(sleep_ms=1)).job for _ in range(40)]
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) = 40 FROM outbox_events WHERE status = 'published'"
            ),
            message="never published",
        )
    await db.execute("UPDATE jobs SET updated_at = now() - interval '1 minute'")
    pools = [await create_pool(database_url, 4) for _ in range(2)]
    try:
        replicas = [OutboxRepository(p) for p in pools]
        counts = await asyncio.gather(
            *(r.redispatch_stranded(30, 7) for r in replicas for _ in range(6))
        )
    finally:
        for p in pools:
            await p.close()

    assert sum(counts) == 40
    per_job = await db.fetch(
        "SELECT aggregate_id, count(*) AS n FROM outbox_events"
        " WHERE dedupe_key LIKE 'job.dispatch:%:redispatch:%' GROUP BY aggregate_id"
    )
    assert sorted(r["aggregate_id"] for r in per_job) == sorted(j.id for j in jobs)
    assert {r["n"] for r in per_job} == {1}
