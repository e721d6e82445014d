"""One user cannot grow a job without bound (issue 25, item 8), against real PostgreSQL and
NATS: SendSignal past JOBS_MAX_SIGNALS_PER_JOB is refused (RESOURCE_EXHAUSTED,
SIGNAL_LIMIT_REACHED) and writes nothing, also when many senders race for the last
places; GetJob of a job with any number of timeline events, signals, artifacts and
children answers within gRPC's default 4 MiB message limit and says what it left out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
from durable_jobs_client import AsyncJobsClient
from durable_jobs_client import SignalLimitReached as ClientSignalLimitReached

from job_service.app import JobServiceApp
from shared.errors import SignalLimitReached
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.stack import ALL_ROLES_TOKEN, Client, open_channel, running_job_service

LIMIT = 5


@pytest.fixture
async def limited(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    """job_service taking at most LIMIT signals per job."""
    async with running_job_service(database_url, nats_url, max_signals_per_job=LIMIT) as app:
        yield app


@pytest.fixture
async def client(limited: JobServiceApp) -> AsyncIterator[Client]:
    async with open_channel(f"127.0.0.1:{limited.port}") as channel:
        yield Client(channel)


async def send(client: Client, job_id: str, name: str, key: str = "") -> jpb.SendSignalResponse:
    return await client.jobs.SendSignal(
        jpb.SendSignalRequest(
            job_id=job_id,
            user_id="user-1",
            name=name,
            payload=struct_from_dict({"n": name}),
            idempotency_key=key,
        )
    )


async def outcome(call: Any) -> jpb.SendSignalResponse | grpc.aio.AioRpcError:
    try:
        answer: jpb.SendSignalResponse = await call
    except grpc.aio.AioRpcError as error:
        return error
    return answer


async def test_a_signal_past_the_limit_is_refused_and_writes_nothing(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    for i in range(LIMIT):
        await send(client, job.id, f"s{i}", key=f"k{i}")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await send(client, job.id, "one-too-many")

    assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    error = error_from_rpc(raised.value)
    assert isinstance(error, SignalLimitReached)
    assert str(LIMIT) in error.message
    assert error.metadata == {"job_id": job.id, "limit": str(LIMIT)}
    assert await db.fetchval("SELECT count(*) FROM job_signals") == LIMIT
    assert await db.fetchval("SELECT signal_seq FROM jobs WHERE id = $1", job.id) == LIMIT
    # a repeat of a stored signal is still answered: it adds nothing
    again = await send(client, job.id, "s0", key="k0")
    assert (again.signal.seq, again.created) == (1, False)
    # the limit is per job
    other = (await client.create()).job
    assert (await send(client, other.id, "fresh")).signal.seq == 1


async def test_concurrent_senders_never_pass_the_limit(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    await send(client, job.id, "first")

    answers = await asyncio.gather(
        *(outcome(send(client, job.id, f"race{i}")) for i in range(4 * LIMIT))
    )

    stored = [a for a in answers if isinstance(a, jpb.SendSignalResponse)]
    refused = [a for a in answers if isinstance(a, grpc.aio.AioRpcError)]
    assert sorted(a.signal.seq for a in stored) == list(range(2, LIMIT + 1))
    assert len(refused) == 4 * LIMIT - (LIMIT - 1)
    assert all(isinstance(error_from_rpc(e), SignalLimitReached) for e in refused)
    assert await db.fetchval("SELECT count(*) FROM job_signals") == LIMIT
    assert await db.fetchval("SELECT signal_seq FROM jobs") == LIMIT


async def test_the_client_library_raises_its_own_class_for_the_limit(
    client: Client, limited: JobServiceApp
) -> None:
    job = (await client.create()).job
    target = f"127.0.0.1:{limited.port}"
    async with AsyncJobsClient(target, user_id="user-1", token=ALL_ROLES_TOKEN) as jobs:
        for i in range(LIMIT):
            await jobs.signal(job.id, f"s{i}")
        with pytest.raises(ClientSignalLimitReached) as raised:
            await jobs.signal(job.id, "one-too-many")
    assert raised.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
