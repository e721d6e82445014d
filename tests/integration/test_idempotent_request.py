"""Idempotency over the whole request (issue 25, item 4): the same key with another run
time is IDEMPOTENCY_KEY_REUSED, never the first job; the same call with a relative delay,
sent again later, is still the same request. CreateJob and each item of CreateJobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import grpc
import pytest

from shared.errors import IdempotencyKeyReused
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc, error_from_status
from tests.support.stack import Client


def _request(key: str, *, run_at: datetime | None = None, delay_s: float | None = None) -> Any:
    request = jpb.CreateJobRequest(
        user_id="user-1",
        job_type="synthetic",
        input=struct_from_dict({"sleep_ms": 1}),
        idempotency_key=key,
    )
    if run_at is not None:
        request.run_at.FromDatetime(run_at)
    if delay_s is not None:
        request.delay.FromTimedelta(timedelta(seconds=delay_s))
    return request


def _soon(hours: float) -> datetime:
    return (datetime.now(UTC) + timedelta(hours=hours)).replace(microsecond=0)


async def _refused(client: Client, request: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.jobs.CreateJob(request)
    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert type(error_from_rpc(raised.value)) is IdempotencyKeyReused


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"run_at": _soon(1)}, {"run_at": _soon(2)}),
        ({"delay_s": 60}, {"delay_s": 120}),
        ({}, {"delay_s": 60}),
        ({"run_at": _soon(1)}, {}),
        ({"delay_s": 3600}, {"run_at": _soon(1)}),
    ],
    ids=["run_at", "delay", "none-then-delay", "run_at-then-none", "delay-then-run_at"],
)
async def test_the_same_key_with_another_run_time_is_refused(
    client: Client, db: asyncpg.Connection, first: dict[str, Any], second: dict[str, Any]
) -> None:
    made = await client.jobs.CreateJob(_request("timed", **first))

    await _refused(client, _request("timed", **second))

    assert made.created
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1


async def test_the_same_call_with_a_relative_delay_sent_again_later_is_the_same_request(
    client: Client, db: asyncpg.Connection
) -> None:
    first = await client.jobs.CreateJob(_request("delayed", delay_s=600))
    before = await db.fetchval("SELECT next_run_at FROM jobs WHERE id = $1", first.job.id)

    # the clock has moved on between the two sends: the resolved times differ
    again = await client.jobs.CreateJob(_request("delayed", delay_s=600))

    assert (first.created, again.created) == (True, False)
    assert again.job.id == first.job.id
    # the job keeps the first call's due time
    assert await db.fetchval("SELECT next_run_at FROM jobs WHERE id = $1", first.job.id) == before


async def test_the_same_run_at_and_a_zero_delay_are_the_same_request(client: Client) -> None:
    at = _soon(3)
    assert (await client.jobs.CreateJob(_request("at", run_at=at))).created
    assert not (await client.jobs.CreateJob(_request("at", run_at=at))).created
    assert (await client.jobs.CreateJob(_request("now"))).created
    assert not (await client.jobs.CreateJob(_request("now", delay_s=0))).created


async def test_createjobs_items_hash_their_run_time_as_create_job_does(
    client: Client, db: asyncpg.Connection
) -> None:
    await client.jobs.CreateJob(_request("batch-timed", delay_s=60))
    requests = [
        _request("batch-timed", delay_s=60),  # the same request: the existing job
        _request("batch-timed", delay_s=90),  # another delay: refused
        _request("batch-timed", run_at=_soon(1)),  # a time instead: refused
    ]

    results = (await client.jobs.CreateJobs(jpb.CreateJobsRequest(requests=requests))).results

    assert not results[0].response.created
    assert [type(error_from_status(r.error)) for r in results[1:]] == [IdempotencyKeyReused] * 2
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1
