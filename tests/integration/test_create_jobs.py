"""CreateJobs against real PostgreSQL and NATS: up to 500 jobs in one call, each judged as
CreateJob judges it (validation, idempotency, quotas), a refused item answered with its own
status and nothing stored for it."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared import tracing
from shared.errors import IdempotencyKeyReused, InvalidInput, TooManyJobs, UnknownJobType
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc, error_from_status
from tests.support.stack import (
    CLIENT_TOKEN,
    Client,
    count_rows,
    open_channel,
    running_job_service,
)


def item(n: int, user_id: str = "user-1", key: str | None = None, **job_input: Any) -> Any:
    return jpb.CreateJobRequest(
        user_id=user_id,
        job_type="synthetic",
        input=struct_from_dict({"sleep_ms": n % 7, **job_input}),
        idempotency_key=f"batch-{n}" if key is None else key,
    )


async def test_500_items_with_3_invalid_store_497_and_refuse_3_naming_their_fields(
    client: Client, db: asyncpg.Connection, database_url: str
) -> None:
    before = await count_rows(database_url)
    # ten users, fifty jobs each: within the default limit of unfinished jobs per user
    requests = [item(n, user_id=f"user-{n % 10}") for n in range(500)]
    requests[10] = item(10, sleep_ms=-1)
    requests[250] = jpb.CreateJobRequest(user_id="user-1", job_type="no_such_type")
    requests[499] = item(499, user_id="")

    response = await client.jobs.CreateJobs(jpb.CreateJobsRequest(requests=requests))

    assert len(response.results) == 500
    refused = {n: r for n, r in enumerate(response.results) if r.HasField("error")}
    assert sorted(refused) == [10, 250, 499]
    errors = {n: error_from_status(r.error) for n, r in refused.items()}
    assert type(errors[10]) is InvalidInput
    assert [v.field for v in errors[10].violations] == ["input.sleep_ms"]
    assert type(errors[250]) is UnknownJobType
    assert "user_id" in [v.field for v in errors[499].violations]
    codes = {n: r.error.code for n, r in refused.items()}
    assert codes == {
        10: grpc.StatusCode.INVALID_ARGUMENT.value[0],
        250: grpc.StatusCode.NOT_FOUND.value[0],  # no worker declared it
        499: grpc.StatusCode.INVALID_ARGUMENT.value[0],
    }
    stored = [r.response for n, r in enumerate(response.results) if n not in refused]
    assert all(s.created and s.job.status == job_pb2.JOB_STATUS_QUEUED for s in stored)
    ids = [s.job.id for s in stored]
    assert len(set(ids)) == 497
    after = await count_rows(database_url)
    assert after["jobs"] - before["jobs"] == 497
    assert after["job_snapshots"] - before["job_snapshots"] == 497
    assert after["job_events"] - before["job_events"] == 497
    # each answer is its own item's job, with its own idempotency key and input
    rows = await db.fetch(
        "SELECT id::text, idempotency_key FROM jobs WHERE id = ANY($1::uuid[])", ids
    )
    by_id = {r["id"]: r["idempotency_key"] for r in rows}
    assert [by_id[i] for i in ids] == [f"batch-{n}" for n in range(500) if n not in refused]
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = 'batch-10'") == 0
    dispatch = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE event_type = 'job.dispatch'"
        " AND aggregate_id = ANY($1::text[])",
        ids,
    )
    assert dispatch == 497


async def test_idempotency_per_item_as_for_create_job(
    client: Client, db: asyncpg.Connection
) -> None:
    first = await client.create(key="known", sleep_ms=1)
    requests = [
        item(0, key="known", sleep_ms=1),  # the same request: the existing job
        item(1, key="known-other"),
        item(2, key="known", sleep_ms=2),  # the key with another request: refused
        item(1, key="known-other"),  # a repeat inside the batch: the same job
        item(4, key="known-other"),  # the same key inside the batch, another request
    ]

    results = (await client.jobs.CreateJobs(jpb.CreateJobsRequest(requests=requests))).results

    assert results[0].response.job.id == first.job.id
    assert not results[0].response.created
    assert results[1].response.created
    assert type(error_from_status(results[2].error)) is IdempotencyKeyReused
    assert results[3].response.job.id == results[1].response.job.id
    assert not results[3].response.created
    assert type(error_from_status(results[4].error)) is IdempotencyKeyReused
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE user_id = 'user-1'") == 2


async def test_quotas_count_per_item_in_order(database_url: str, nats_url: str) -> None:
    async with (
        running_job_service(database_url, nats_url, max_active_jobs_per_user=3) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        await client.create(user_id="u-a", sleep_ms=1)
        requests = [item(n, user_id="u-a") for n in range(4)] + [item(9, user_id="u-b")]

        results = (await client.jobs.CreateJobs(jpb.CreateJobsRequest(requests=requests))).results

    assert [r.HasField("response") for r in results] == [True, True, False, False, True]
    refusal = error_from_status(results[2].error)
    assert type(refusal) is TooManyJobs
    assert refusal.retry_after_s is not None and refusal.retry_after_s > 0
    db = await asyncpg.connect(database_url)
    try:
        counts = dict(await db.fetch("SELECT user_id, count(*) FROM jobs GROUP BY user_id"))
    finally:
        await db.close()
    assert counts == {"u-a": 3, "u-b": 1}


@pytest.mark.parametrize("size", [0, 501])
async def test_an_empty_or_oversized_batch_is_refused(client: Client, size: int) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.jobs.CreateJobs(jpb.CreateJobsRequest(requests=[item(n) for n in range(size)]))

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error_from_rpc(raised.value).violations] == ["requests"]


async def test_createjobs_records_the_creating_principal_as_create_job_does(
    target: str, db: asyncpg.Connection
) -> None:
    async with open_channel(target, CLIENT_TOKEN) as channel:
        answer = await Client(channel).jobs.CreateJobs(
            jpb.CreateJobsRequest(requests=[item(0), item(1)])
        )

    ids = [r.response.job.id for r in answer.results]
    assert all(r.response.job.created_by == "" for r in answer.results)  # never shown to it
    stored = await db.fetch("SELECT created_by FROM jobs WHERE id = ANY($1::uuid[])", ids)
    assert [r["created_by"] for r in stored] == ["test-client"] * 2


async def test_createjobs_continues_the_callers_trace_as_create_job_does(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    spans = InMemorySpanExporter()
    tracing.configure("durable-jobs-test", exporter=spans)
    try:
        async with (
            running_job_service(database_url, nats_url) as app,
            open_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            answer = await Client(channel).jobs.CreateJobs(
                jpb.CreateJobsRequest(requests=[item(0)]),
                metadata=(("traceparent", f"00-{caller_trace}-{caller_span}-01"),),
            )
    finally:
        tracing.shutdown()

    [create] = [s for s in spans.get_finished_spans() if s.name == "CreateJobs"]
    assert create.parent is not None and f"{create.parent.span_id:016x}" == caller_span
    assert f"{create.context.trace_id:032x}" == caller_trace
    # the job's later spans follow from its dispatch row's trace: the caller's trace too
    payload = await db.fetchval(
        "SELECT payload FROM outbox_events WHERE aggregate_id = $1",
        answer.results[0].response.job.id,
    )
    assert caller_trace in json.loads(payload)["trace"]["traceparent"]
