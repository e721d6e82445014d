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
from job_service.domain.jobs import MAX_ARTIFACT_BYTES_PER_JOB, MAX_ARTIFACTS_PER_JOB, SHOWN
from shared.errors import SignalLimitReached
from shared.grpc_client import aio_channel
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.stack import (
    ALL_ROLES_TOKEN,
    Client,
    channel_config,
    open_channel,
    result_request,
    running_job_service,
)

LIMIT = 5


@pytest.fixture
async def limited(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    """job_service taking at most LIMIT signals per job."""
    async with running_job_service(database_url, nats_url, max_signals_per_job=LIMIT) as app:
        yield app


@pytest.fixture
async def limited_client(limited: JobServiceApp) -> AsyncIterator[Client]:
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
    limited_client: Client, db: asyncpg.Connection
) -> None:
    client = limited_client
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
    limited_client: Client, db: asyncpg.Connection
) -> None:
    client = limited_client
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
    limited_client: Client, limited: JobServiceApp
) -> None:
    job = (await limited_client.create()).job
    target = f"127.0.0.1:{limited.port}"
    async with AsyncJobsClient(target, user_id="user-1", token=ALL_ROLES_TOKEN) as jobs:
        for i in range(LIMIT):
            await jobs.signal(job.id, f"s{i}")
        with pytest.raises(ClientSignalLimitReached) as raised:
            await jobs.signal(job.id, "one-too-many")
    assert raised.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED


# --- GetJob stays within the message limit --------------------------------------------

DEFAULT_LIMIT = 4 * 1024 * 1024  # gRPC's default max receive message length
NAME = "n" * 64  # the longest signal name


async def grow(db: asyncpg.Connection, job_id: str, n: int) -> None:
    """Gives the job ``n`` signals and ``n`` timeline events the way the engine stores
    them (a user could send that many before the limit; events stand for a long life),
    1500 artifacts of 2 kB (stored before the artifact limit) and 1500 child jobs (retried
    children stay their parent's)."""
    await db.execute(
        "INSERT INTO job_signals (job_id, seq, name, payload)"
        " SELECT $1, g, $2 || g, '{}' FROM generate_series(1, $3) g",
        job_id,
        NAME[:-6],
        n,
    )
    await db.execute("UPDATE jobs SET signal_seq = $2 WHERE id = $1", job_id, n)
    await db.execute(
        "INSERT INTO job_events (job_id, from_status, to_status, attempt, reason)"
        " SELECT $1, 'queued', 'queued', g, 'reason-' || repeat('r', 40) || g"
        " FROM generate_series(1, $2) g",
        job_id,
        n,
    )
    await db.execute(
        "INSERT INTO job_artifacts (job_id, artifact_type, artifact_id, ordinal, payload)"
        " SELECT $1, 'part', g::text, g, jsonb_build_object('text', repeat('a', 2000))"
        " FROM generate_series(1, 1500) g",
        job_id,
    )
    await db.execute(
        """
        INSERT INTO jobs
        SELECT (jsonb_populate_record(NULL::jobs, to_jsonb(j) || jsonb_build_object(
            'id', gen_random_uuid(), 'parent_job_id', j.id, 'idempotency_key', NULL,
            'trigger_type', 'child_job', 'created_at', j.created_at + g * interval '1 ms'))).*
        FROM jobs j, generate_series(1, 1500) g WHERE j.id = $1
        """,
        job_id,
    )


@pytest.mark.slow
async def test_get_job_of_a_grown_job_answers_within_the_default_message_limit(
    client: Client, db: asyncpg.Connection, target: str
) -> None:
    job = (await client.create()).job
    await grow(db, job.id, 60_000)
    options = [("grpc.max_receive_message_length", DEFAULT_LIMIT)]

    async with aio_channel(channel_config(target), options) as channel:
        plain = Client(channel)
        shown = await plain.get(job.id)
        admin = (await plain.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job

    for answer in (shown, admin):
        assert answer.ByteSize() < DEFAULT_LIMIT // 4
        # the newest signals and events, oldest first; the oldest children
        assert (answer.signals_total, len(answer.signals)) == (60_000, SHOWN.signals)
        assert [s.seq for s in answer.signals] == list(range(60_001 - SHOWN.signals, 60_001))
        assert answer.events_total == 60_001  # with its creation
        assert len(answer.events) == SHOWN.events
        assert [e.attempt for e in answer.events] == list(range(60_001 - SHOWN.events, 60_001))
        assert (answer.child_jobs_total, len(answer.child_job_ids)) == (1500, SHOWN.child_jobs)
        # the first artifacts, as many as fit the byte budget
        assert answer.artifacts_total == 1500
        assert len(answer.artifacts) == SHOWN.artifact_bytes // len('{"text": ""}' + "a" * 2000)
        assert [a.ordinal for a in answer.artifacts] == list(range(1, len(answer.artifacts) + 1))
    oldest = await db.fetch(
        "SELECT id::text AS id FROM jobs WHERE parent_job_id = $1 ORDER BY created_at, id LIMIT $2",
        job.id,
        SHOWN.child_jobs,
    )
    assert list(shown.child_job_ids) == [r["id"] for r in oldest]


async def test_a_small_job_shows_every_list_whole_with_its_totals(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    await send(client, job.id, "approve")
    lease = (await client.lock(job.id)).job
    await client.executor.SubmitResult(
        result_request(job.id, lease.lease_token, {"attempt": 1, "data": "x"})
    )

    shown = await client.get(job.id)

    assert (shown.signals_total, len(shown.signals)) == (1, 1)
    assert shown.events_total == len(shown.events) == 3  # queued, running, succeeded
    assert (shown.artifacts_total, len(shown.artifacts)) == (1, 1)
    assert (shown.child_jobs_total, len(shown.child_job_ids)) == (0, 0)


async def artifacts_refused(client: Client, db: asyncpg.Connection, artifacts: Any) -> None:
    """A result with these artifacts fails its attempt and stores none of them."""
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job
    request = result_request(job.id, lease.lease_token, {"attempt": 1, "data": "x"})
    del request.artifacts[:]
    request.artifacts.extend(artifacts)

    answer = await client.executor.SubmitResult(request)

    assert answer.status == job_pb2.JOB_STATUS_RETRYING
    shown = await client.get(job.id)
    assert shown.error_code == "INTERNAL_PROJECTION_REFUSED"
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 0


async def test_a_result_with_too_many_artifacts_fails_its_attempt(
    client: Client, db: asyncpg.Connection
) -> None:
    many = [
        job_pb2.Artifact(artifact_type="part", artifact_id=str(i), ordinal=i)
        for i in range(MAX_ARTIFACTS_PER_JOB + 1)
    ]
    await artifacts_refused(client, db, many)


async def test_a_result_with_too_large_artifacts_fails_its_attempt(
    client: Client, db: asyncpg.Connection
) -> None:
    large = [
        job_pb2.Artifact(
            artifact_type="part",
            artifact_id=str(i),
            payload=struct_from_dict({"text": "x" * (MAX_ARTIFACT_BYTES_PER_JOB // 4)}),
        )
        for i in range(4)
    ]
    await artifacts_refused(client, db, large)
