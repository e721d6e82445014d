"""CreateJob against real PostgreSQL and NATS: one transaction, validation before any
write, idempotency with no time window, and a prompt dispatch."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import grpc
import pytest
from nats.aio.client import Client as NatsClient

from shared.constants import (
    DISPATCH_STREAM,
    EVENTS_STREAM,
    MSG_ID_HEADER,
    dispatch_consumer,
    dispatch_subject,
)
from shared.errors import IdempotencyKeyReused, InvalidInput, UnknownJobType
from shared.jetstream import ensure_dispatch_consumer
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.stack import (
    ADMIN_TOKEN,
    CLIENT_TOKEN,
    Client,
    count_rows,
    open_channel,
    result_request,
    running_job_service,
)


async def test_create_stores_job_snapshot_event_and_dispatch_row(
    client: Client, db: asyncpg.Connection
) -> None:
    response = await client.create(sleep_ms=5, output_bytes=3)

    assert response.created
    assert response.job.status == job_pb2.JOB_STATUS_QUEUED
    job = await db.fetchrow("SELECT * FROM jobs WHERE id = $1", response.job.id)
    assert (job["status"], job["queue"], job["attempt_count"]) == ("queued", "ai-interactive", 0)
    snapshot = await db.fetchval(
        "SELECT payload FROM job_snapshots WHERE job_id = $1", response.job.id
    )
    # the input as given, with the declared defaults of the fields it left out
    assert json.loads(snapshot) == {
        "wait_signals": [],
        "sleep_ms": 5,
        "fail": "none",
        "fail_times": 0,
        "output_bytes": 3,
        "signal_timeout_ms": 20_000,
    }
    events = await db.fetch("SELECT to_status FROM job_events WHERE job_id = $1", response.job.id)
    assert [e["to_status"] for e in events] == ["queued"]
    outbox = await db.fetchrow(
        "SELECT event_type, subject, payload FROM outbox_events WHERE aggregate_id = $1",
        response.job.id,
    )
    assert outbox["event_type"] == "job.dispatch"
    assert outbox["subject"] == "jobs.dispatch.ai-interactive"
    # ids only: no user input travels through the outbox
    assert json.loads(outbox["payload"]) == {"job_id": response.job.id, "attempt": 1}


@pytest.mark.parametrize(
    ("overrides", "error_type", "field"),
    [
        ({"sleep_ms": -1}, InvalidInput, "input.sleep_ms"),
        ({"fail": "explode"}, InvalidInput, "input.fail"),
        ({"unexpected": 1}, InvalidInput, "input.unexpected"),
        ({"job_type": "no_such_type"}, UnknownJobType, "job_type"),
        ({"user_id": ""}, InvalidInput, "user_id"),
        ({"key": "k" * 256}, InvalidInput, "idempotency_key"),
        ({"padding": "x" * 300_000}, InvalidInput, "input"),
        ({"sleep_ms": float("nan")}, InvalidInput, "input"),
        ({"sleep_ms": float("inf")}, InvalidInput, "input"),
        ({"fail": "no\x00ne"}, InvalidInput, "input"),
        ({"key": "order\x00-1"}, InvalidInput, "idempotency_key"),
    ],
)
async def test_bad_input_is_refused_naming_the_field_and_writes_nothing(
    client: Client, database_url: str, overrides: dict, error_type: type, field: str
) -> None:
    before = await count_rows(database_url)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.create(**overrides)

    # an undeclared job type is not found; anything else is a bad argument
    expected = "NOT_FOUND" if error_type is UnknownJobType else "INVALID_ARGUMENT"
    assert raised.value.code().name == expected
    error = error_from_rpc(raised.value)
    assert type(error) is error_type
    assert field in [v.field for v in error.violations]
    assert await count_rows(database_url) == before


async def test_same_idempotency_key_returns_the_existing_job(
    client: Client, database_url: str
) -> None:
    first = await client.create(key="order-7", sleep_ms=1)
    rows = await count_rows(database_url)

    again = await client.create(key="order-7", sleep_ms=1)

    assert (first.created, again.created) == (True, False)
    assert again.job.id == first.job.id
    assert await count_rows(database_url) == rows


async def test_same_key_with_a_different_request_is_refused(
    client: Client, database_url: str
) -> None:
    await client.create(key="order-8", sleep_ms=1)
    rows = await count_rows(database_url)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.create(key="order-8", sleep_ms=2)

    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert isinstance(error_from_rpc(raised.value), IdempotencyKeyReused)
    assert await count_rows(database_url) == rows


async def test_keys_are_scoped_to_user_and_job_type(client: Client) -> None:
    mine = await client.create(user_id="alice", key="shared-key")
    theirs = await client.create(user_id="bob", key="shared-key")

    assert mine.created and theirs.created
    assert mine.job.id != theirs.job.id


async def test_twenty_concurrent_identical_creates_yield_exactly_one_job(
    client: Client, db: asyncpg.Connection
) -> None:
    responses = await asyncio.gather(*(client.create(key="race", sleep_ms=3) for _ in range(20)))

    assert len({r.job.id for r in responses}) == 1
    assert sum(r.created for r in responses) == 1
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1
    assert await db.fetchval("SELECT count(*) FROM outbox_events") == 1
    assert await db.fetchval("SELECT count(*) FROM job_snapshots") == 1


async def test_a_new_job_is_dispatched_at_once_not_at_the_next_poll(
    database_url: str, nats_url: str, nats_client: NatsClient
) -> None:
    # A poll this slow would make the test time out: only the wake-up can pass it.
    async with (
        running_job_service(database_url, nats_url, outbox_poll_interval_s=60) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        js = nats_client.jetstream()
        await ensure_dispatch_consumer(js, "ai-interactive")
        subscription = await js.pull_subscribe(
            dispatch_subject("ai-interactive"),
            durable=dispatch_consumer("ai-interactive"),
            stream=DISPATCH_STREAM,
        )
        # the start-up poll has run; from here on only a wake-up publishes
        created = await Client(channel).create()

        messages = await subscription.fetch(1, timeout=2.0)

    assert json.loads(messages[0].data) == {"job_id": created.job.id, "attempt": 1}
    assert messages[0].headers[MSG_ID_HEADER] == f"job.dispatch:{created.job.id}:create"


async def test_job_ids_are_time_ordered_version_7_uuids_from_either_create(
    client: Client, db: asyncpg.Connection
) -> None:
    # CreateJob's id is the database's job_id_v7(), CreateJobs' the service's new_job_id()
    one = (await client.create(sleep_ms=1)).job.id
    batch = await client.jobs.CreateJobs(
        jpb.CreateJobsRequest(
            requests=[
                jpb.CreateJobRequest(
                    user_id="user-1", job_type="synthetic", input=struct_from_dict({"sleep_ms": 1})
                )
            ]
        )
    )
    [other] = [r.response.job.id for r in batch.results]

    created = await db.fetch(
        "SELECT id::text, (extract(epoch FROM created_at) * 1000)::bigint AS ms FROM jobs"
    )
    for row in created:
        parsed = uuid.UUID(row["id"])
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
        # the id's millisecond is its create's (the statement's clock, give or take a tick)
        assert abs((parsed.int >> 80) - row["ms"]) <= 1000
    assert {r["id"] for r in created} == {one, other}
    assert one < other  # made later, sorts later


async def test_a_results_domain_event_is_published_with_its_commit_without_a_claim(
    database_url: str, nats_url: str, nats_client: NatsClient, db: asyncpg.Connection
) -> None:
    # SubmitResults writes the event row claimed by its replica and hands it to that
    # replica's dispatcher: with a 60 s poll, only that hand-over can publish it in time.
    async with (
        running_job_service(database_url, nats_url, outbox_poll_interval_s=60) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        js = nats_client.jetstream()
        events = await js.pull_subscribe("jobs.events.synthetic.succeeded", stream=EVENTS_STREAM)
        client = Client(channel)
        job = (await client.create()).job
        lease = (await client.lock(job.id)).job
        await client.executor.SubmitResult(
            result_request(job.id, lease.lease_token, {"attempt": 1, "data": "x"})
        )

        messages = await events.fetch(1, timeout=2.0)

    assert json.loads(messages[0].data)["job_id"] == job.id
    assert messages[0].headers[MSG_ID_HEADER] == f"job.succeeded:{job.id}"
    # claimed once, by the statement that wrote it: the dispatcher never claimed it again
    rows = await db.fetch("SELECT status, attempt_count, locked_by FROM outbox_events")
    assert [tuple(r) for r in rows] == [("published", 1, None)] * 2


async def test_the_creating_principal_is_stored_and_shown_to_admins_only(
    target: str, db: asyncpg.Connection
) -> None:
    async with open_channel(target, CLIENT_TOKEN) as channel:
        product = Client(channel)
        created = await product.create(user_id="carol", sleep_ms=1)
        assert created.job.created_by == ""  # the owner's answer never shows it
        assert (await product.get(created.job.id, "carol")).created_by == ""

    stored = await db.fetchval("SELECT created_by FROM jobs WHERE id = $1", created.job.id)
    assert stored == "test-client"  # the principal of CLIENT_TOKEN, not the caller's claim

    async with open_channel(target, ADMIN_TOKEN) as channel:
        admin = Client(channel).admin
        seen = await admin.GetJob(apb.AdminGetJobRequest(job_id=created.job.id))
        listed = await admin.ListJobs(apb.AdminListJobsRequest(user_id="carol"))
    assert seen.job.created_by == "test-client"
    assert [j.created_by for j in listed.jobs] == ["test-client"]
