"""Fair share placed atomically: one user's creates made at the same moment — single
CreateJobs, and a CreateJobs batch among them — each take their own place in the user's
line, one quantum apart, as one-by-one creates do. Against real PostgreSQL through the
gRPC API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from itertools import pairwise

import asyncpg
import pytest

from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.stack import Client, open_channel, running_job_service

QUANTUM_S = 1.0  # far longer than the test: every place is set by the line, not the clock
CONCURRENT = 16


@pytest.fixture
async def client(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    async with (
        running_job_service(
            database_url, nats_url, sched_fair_quantum_s=QUANTUM_S, db_pool_size=CONCURRENT
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Client(channel)


async def places(db: asyncpg.Connection) -> list[float]:
    """The places of the waiting jobs, in line order."""
    rows = await db.fetch("SELECT sched_key FROM jobs WHERE status = 'queued' ORDER BY 1")
    return [r["sched_key"] for r in rows]


def spacings(keys: list[float]) -> list[float]:
    return [round(later - earlier, 6) for earlier, later in pairwise(keys)]


async def test_concurrent_creates_of_one_user_take_distinct_places_a_quantum_apart(
    client: Client, db: asyncpg.Connection
) -> None:
    await asyncio.gather(*(client.create(user_id="alice") for _ in range(CONCURRENT)))

    keys = await places(db)

    assert len(keys) == CONCURRENT
    assert spacings(keys) == [QUANTUM_S] * (CONCURRENT - 1)


async def test_a_batch_and_single_creates_at_once_share_the_line_without_ties(
    client: Client, db: asyncpg.Connection
) -> None:
    batch = jpb.CreateJobsRequest(
        requests=[
            jpb.CreateJobRequest(user_id="alice", job_type="synthetic", input=struct_from_dict({}))
            for _ in range(5)
        ]
    )

    await asyncio.gather(
        client.jobs.CreateJobs(batch),
        *(client.create(user_id="alice") for _ in range(CONCURRENT - 5)),
    )
    keys = await places(db)

    assert len(keys) == CONCURRENT
    assert spacings(keys) == [QUANTUM_S] * (CONCURRENT - 1)


async def test_concurrent_retries_of_one_users_failed_jobs_take_distinct_places(
    client: Client, db: asyncpg.Connection
) -> None:
    failed = []
    for _ in range(CONCURRENT):
        job = (await client.create(user_id="alice")).job
        lease = await client.lock(job.id)
        await client.executor.SubmitFailure(
            epb.SubmitFailureRequest(
                job_id=job.id, lease_token=lease.job.lease_token, error_code="JOB_REJECTED"
            )
        )
        failed.append(job.id)

    await asyncio.gather(
        *(client.admin.RetryJob(apb.RetryJobRequest(job_id=job_id)) for job_id in failed)
    )
    keys = await places(db)

    assert len(keys) == CONCURRENT
    assert spacings(keys) == [QUANTUM_S] * (CONCURRENT - 1)
