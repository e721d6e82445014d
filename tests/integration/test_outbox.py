"""The outbox dispatcher against real PostgreSQL and NATS: concurrent claimers publish each
row once, stale claims are taken over, repeated failures end dead."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NatsClient

from devstack.embedded import EmbeddedNats
from job_service.adapters.nats_publisher import NatsPublisher
from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.adapters.postgres.pool import create_pool
from job_service.domain.outbox import OutboxMessage
from job_service.usecases.outbox import OutboxDispatcher
from shared.constants import DISPATCH_STREAM
from shared.jetstream import ensure_streams
from tests.support.wait import eventually


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, 8)
    try:
        yield pool
    finally:
        await pool.close()


async def insert_rows(db: asyncpg.Connection, count: int, subject: str) -> None:
    await db.executemany(
        "INSERT INTO outbox_events (event_type, aggregate_type, aggregate_id, dedupe_key,"
        " subject, payload) VALUES ('job.dispatch', 'job', $1, $2, $3, $4)",
        [(str(i), f"test:{i}", subject, json.dumps({"n": i})) for i in range(count)],
    )


def dispatcher(pool: asyncpg.Pool, nc: NatsClient, owner: str, **overrides) -> OutboxDispatcher:
    options = {"batch_size": 50, "poll_interval_s": 0.05, "claim_ttl_s": 30, "max_attempts": 3}
    return OutboxDispatcher(
        OutboxRepository(pool), NatsPublisher(nc), owner=owner, **{**options, **overrides}
    )


async def test_concurrent_dispatchers_publish_every_row_exactly_once(
    pool: asyncpg.Pool, db: asyncpg.Connection, nats_client: NatsClient
) -> None:
    js = nats_client.jetstream()
    await ensure_streams(js)
    await insert_rows(db, 600, "jobs.dispatch.ai-interactive")
    dispatchers = [dispatcher(pool, nats_client, f"replica-{i}") for i in range(3)]
    runs = [asyncio.create_task(d.run()) for d in dispatchers]
    try:
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) = 600 FROM outbox_events WHERE status = 'published'"
            ),
            message="not every row was published",
        )
    finally:
        for d in dispatchers:
            d.stop()
        await asyncio.gather(*runs)

    assert (await js.stream_info(DISPATCH_STREAM)).state.messages == 600
    # every row was claimed once: no replica claimed a row another had
    assert await db.fetchval("SELECT max(attempt_count) FROM outbox_events") == 1
    owners = await db.fetchval("SELECT count(DISTINCT locked_by) FROM outbox_events")
    assert owners == 0  # cleared on publish


async def test_a_stale_claim_is_taken_over(
    pool: asyncpg.Pool, db: asyncpg.Connection, nats_client: NatsClient
) -> None:
    await ensure_streams(nats_client.jetstream())
    await insert_rows(db, 1, "jobs.dispatch.ai-interactive")
    # a replica claimed the row and died before publishing it
    await db.execute(
        "UPDATE outbox_events SET status = 'processing', locked_by = 'dead-replica',"
        " locked_at = now() - interval '1 hour', attempt_count = 1"
    )

    handled = await dispatcher(pool, nats_client, "survivor", claim_ttl_s=30).dispatch_once()

    assert handled == 1
    row = await db.fetchrow("SELECT status, attempt_count FROM outbox_events")
    assert tuple(row) == ("published", 2)


async def test_a_fresh_claim_of_another_replica_is_left_alone(
    pool: asyncpg.Pool, db: asyncpg.Connection, nats_client: NatsClient
) -> None:
    await insert_rows(db, 1, "jobs.dispatch.ai-interactive")
    await db.execute(
        "UPDATE outbox_events SET status = 'processing', locked_by = 'busy', locked_at = now()"
    )

    assert await dispatcher(pool, nats_client, "other").dispatch_once() == 0


async def claimed_rows(db: asyncpg.Connection, count: int, owner: str) -> list[OutboxMessage]:
    """Rows written already claimed by ``owner``, as CreateJob and SubmitResults write
    theirs, and the messages they hand over."""
    rows = await db.fetch(
        "INSERT INTO outbox_events (event_type, aggregate_type, aggregate_id, dedupe_key,"
        " subject, payload, status, locked_by, locked_at, attempt_count)"
        " SELECT 'job.dispatch', 'job', i::text, 'handed:' || i,"
        " 'jobs.dispatch.ai-interactive', jsonb_build_object('n', i), 'processing', $2, now(), 1"
        " FROM generate_series(1, $1) i"
        " RETURNING id, subject, dedupe_key, payload, attempt_count",
        count,
        owner,
    )
    return [OutboxMessage(**{**dict(r), "payload": json.loads(r["payload"])}) for r in rows]


class CountedClaims(OutboxRepository):
    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.claims = 0

    async def claim(self, owner: str, limit: int, claim_ttl_s: float) -> list[OutboxMessage]:
        self.claims += 1
        return await super().claim(owner, limit, claim_ttl_s)


async def test_rows_handed_over_are_published_without_a_claim(
    pool: asyncpg.Pool, db: asyncpg.Connection, nats_client: NatsClient
) -> None:
    js = nats_client.jetstream()
    await ensure_streams(js)
    store = CountedClaims(pool)
    relay = OutboxDispatcher(
        store,
        NatsPublisher(nats_client),
        owner="replica",
        batch_size=50,
        poll_interval_s=60,  # only the start-up claim: a hand-over must do the rest
        claim_ttl_s=30,
        max_attempts=3,
    )
    run = asyncio.create_task(relay.run())
    try:
        await eventually(lambda: store.claims == 1, message="no start-up claim")
        relay.hand_over(await claimed_rows(db, 120, "replica"))
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) = 120 FROM outbox_events WHERE status = 'published'"
            ),
            message="the handed rows were not published",
        )
    finally:
        relay.stop()
        await run

    assert store.claims == 1
    assert (await js.stream_info(DISPATCH_STREAM)).state.messages == 120
    assert await db.fetchval("SELECT max(attempt_count) FROM outbox_events") == 1


async def test_rows_handed_over_but_not_published_go_back_to_the_table_on_stop(
    pool: asyncpg.Pool, db: asyncpg.Connection, nats_client: NatsClient
) -> None:
    relay = dispatcher(pool, nats_client, "replica")
    relay.hand_over(await claimed_rows(db, 3, "replica"))
    relay.stop()  # before its loop ever ran: nothing was published

    await relay.run()

    rows = await db.fetch("SELECT status, locked_by, attempt_count FROM outbox_events")
    # due at once, for any replica's next claim; the unpublished try does not count
    assert [tuple(r) for r in rows] == [("pending", None, 0)] * 3


async def test_a_row_that_keeps_failing_ends_dead(
    pool: asyncpg.Pool, db: asyncpg.Connection, nats_client: NatsClient
) -> None:
    await ensure_streams(nats_client.jetstream())
    # no stream captures this subject: JetStream answers every publish with an error
    await insert_rows(db, 1, "nowhere.to.go")
    relay = dispatcher(pool, nats_client, "replica", max_attempts=2)
    run = asyncio.create_task(relay.run())
    try:
        row = await eventually(
            lambda: db.fetchrow(
                "SELECT status, attempt_count, last_error FROM outbox_events WHERE status = 'dead'"
            ),
            message="the failing row was not dead-lettered",
        )
    finally:
        relay.stop()
        await run

    assert row["attempt_count"] == 2
    assert row["last_error"]


async def test_a_nats_outage_dead_letters_nothing(
    pool: asyncpg.Pool, db: asyncpg.Connection, nats_server: EmbeddedNats
) -> None:
    nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    try:
        await ensure_streams(nc.jetstream())
        await insert_rows(db, 5, "jobs.dispatch.ai-interactive")
        nats_server.stop()
        relay = OutboxDispatcher(
            OutboxRepository(pool),
            NatsPublisher(nc, publish_timeout_s=0.3),
            owner="replica",
            batch_size=50,
            poll_interval_s=0.05,
            claim_ttl_s=30,
            max_attempts=1,  # a single counted failure would kill a row
        )
        run = asyncio.create_task(relay.run())
        try:
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(*) = 5 FROM outbox_events"
                    " WHERE status = 'pending' AND available_at > now()"
                ),
                message="the outage was not noticed",
            )
            assert await db.fetchval("SELECT max(attempt_count) FROM outbox_events") == 0
            nats_server.start()
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(*) = 5 FROM outbox_events WHERE status = 'published'"
                ),
                timeout=15,
                message="the rows were not published after NATS came back",
            )
        finally:
            relay.stop()
            await run
    finally:
        await nc.close()

    assert await db.fetchval("SELECT count(*) FROM outbox_events WHERE status = 'dead'") == 0


async def test_published_rows_past_their_retention_are_pruned(
    pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    await insert_rows(db, 6, "jobs.dispatch.ai-interactive")
    await db.execute(
        "UPDATE outbox_events SET status = 'published', published_at = now() - interval '2 days'"
        " WHERE id IN (SELECT id FROM outbox_events ORDER BY id LIMIT 3)"
    )
    await db.execute(
        "UPDATE outbox_events SET status = 'published', published_at = now()"
        " WHERE id IN (SELECT id FROM outbox_events ORDER BY id OFFSET 3 LIMIT 2)"
    )

    pruned = await OutboxRepository(pool).prune(retention_s=24 * 3600, limit=2)
    pruned += await OutboxRepository(pool).prune(retention_s=24 * 3600, limit=2)

    assert pruned == 3
    left = await db.fetch("SELECT status FROM outbox_events ORDER BY id")
    assert [r["status"] for r in left] == ["published", "published", "pending"]
