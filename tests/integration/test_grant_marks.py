"""A pushed grant marks the dispatch rows it uses published in its own statement (issue
42): grant and mark commit together, as many rows as jobs granted, only rows the
dispatcher named still holds. Against real PostgreSQL, through the claim statements."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from job_service.adapters.postgres.claims import ClaimRepository
from job_service.adapters.postgres.pool import create_pool
from job_service.domain.outbox import DispatchMark
from shared.constants import Queue
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.wait import eventually

INTERACTIVE = Queue.INTERACTIVE.value
OWNER = "dispatcher-under-test"


@pytest.fixture
async def client(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    async with (
        running_job_service(database_url, nats_url) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Client(channel)


@pytest.fixture
async def claims(database_url: str) -> AsyncIterator[ClaimRepository]:
    pool = await create_pool(database_url, 2)
    try:
        yield ClaimRepository(pool, lease_ttl_s=60)
    finally:
        await pool.close()


async def dispatch_rows(client: Client, db: asyncpg.Connection, jobs: int) -> list[int]:
    """``jobs`` waiting jobs whose dispatch rows the dispatcher ``OWNER`` holds claimed (the
    service published them first: no worker waits; they are taken back as claimed)."""
    for n in range(jobs):
        await client.create(user_id=f"user-{n}")
    await eventually(
        lambda: db.fetchval(
            "SELECT count(*) = $1 FROM outbox_events"
            " WHERE event_type = 'job.dispatch' AND status = 'published'",
            jobs,
        ),
        message="the dispatch rows were not published",
    )
    ids = await db.fetch(
        "UPDATE outbox_events SET status = 'processing', locked_by = $1, locked_at = now(),"
        " published_at = NULL"
        " WHERE event_type = 'job.dispatch' RETURNING id",
        OWNER,
    )
    return sorted(r["id"] for r in ids)


async def statuses(db: asyncpg.Connection, ids: list[int]) -> list[str]:
    rows = await db.fetch("SELECT id, status FROM outbox_events WHERE id = ANY($1)", ids)
    found = {r["id"]: r["status"] for r in rows}
    return [found[i] for i in ids]


async def test_an_unlimited_grant_marks_as_many_rows_as_it_grants_in_order(
    client: Client, db: asyncpg.Connection, claims: ClaimRepository
) -> None:
    ids = await dispatch_rows(client, db, 3)

    async with claims.connection() as tx:
        granted = await tx.grant_unlimited(
            INTERACTIVE, None, 2, "w1", mark=DispatchMark(OWNER, tuple(ids))
        )

    assert len(granted) == 2
    assert await statuses(db, ids) == ["published", "published", "processing"]
    assert await db.fetchval(
        "SELECT bool_and(published_at IS NOT NULL AND locked_by IS NULL) FROM outbox_events"
        " WHERE id = ANY($1)",
        ids[:2],
    )


async def test_a_grant_marks_only_rows_its_dispatcher_still_holds(
    client: Client, db: asyncpg.Connection, claims: ClaimRepository
) -> None:
    ids = await dispatch_rows(client, db, 2)
    # the first row's claim went stale and another dispatcher took it over
    await db.execute("UPDATE outbox_events SET locked_by = 'another' WHERE id = $1", ids[0])

    async with claims.transaction() as tx:
        candidates = await tx.candidates(INTERACTIVE, None, 2, [])
        granted = await tx.grant(
            [(c.job_id, 0) for c in candidates], "w1", DispatchMark(OWNER, tuple(ids))
        )

    assert len(granted) == 2
    assert await statuses(db, ids) == ["processing", "published"]


async def test_a_grant_of_nothing_marks_nothing(
    client: Client, db: asyncpg.Connection, claims: ClaimRepository
) -> None:
    ids = await dispatch_rows(client, db, 1)

    async with claims.connection() as tx:
        granted = await tx.grant_unlimited(
            INTERACTIVE, ["synthetic@0.0.1"], 1, "w1", mark=DispatchMark(OWNER, tuple(ids))
        )

    assert granted == []
    assert await statuses(db, ids) == ["processing"]
