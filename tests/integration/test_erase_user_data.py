"""EraseUserData (issue 44) against real PostgreSQL and NATS: a user's Feynman job (with its
child, artifacts, steps and usage), a schedule and a stored key erased for good — GetJob is
NOT_FOUND, no row of theirs is left but the daily usage counters, and a ciphertext taken
before the erase no longer opens even with the KEK. A dry run counts and changes nothing,
an erase refuses while the user's jobs run (or cancels them first when asked), a second
erase answers zeros, and a replica that cached the destroyed key seals no new job under it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest

from job_service.adapters.local_kek import LocalKeyEncryptionKey
from job_service.adapters.postgres.data_keys import DataKeyRepository
from job_service.app import JobServiceApp
from job_service.domain.envelopes import INPUT
from job_service.usecases.sealing import PayloadUnreadable, Sealer
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import dict_from_struct, struct_from_dict
from tests.integration.test_payload_encryption import MARKED_INPUT, TEST_DATA_KEK
from tests.support.ai import feynman_flow
from tests.support.stack import Client, open_channel, running_job_service, worker_settings
from worker_service.app import WorkerApp

USER = "user-1"  # feynman_flow reads as user-1
OTHER = "staying-user"
# Every table that holds a user's rows, by how a user's rows are found in it.
MINE = {
    "jobs": "SELECT count(*) FROM jobs WHERE user_id = $1",
    "job_snapshots": "SELECT count(*) FROM job_snapshots s JOIN jobs j ON j.id = s.job_id"
    " WHERE j.user_id = $1",
    "schedules": "SELECT count(*) FROM schedules WHERE user_id = $1",
    "credentials": "SELECT count(*) FROM credentials WHERE user_id = $1",
    "user_data_keys": "SELECT count(*) FROM user_data_keys WHERE user_id = $1",
}


@pytest.fixture
async def sealing(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    async with running_job_service(database_url, nats_url, data_kek=TEST_DATA_KEK) as app:
        yield app


@pytest.fixture
async def client(sealing: JobServiceApp) -> AsyncIterator[Client]:
    async with open_channel(f"127.0.0.1:{sealing.port}") as channel:
        yield Client(channel)


@pytest.fixture
async def worker(sealing: JobServiceApp, nats_url: str) -> AsyncIterator[WorkerApp]:
    async with WorkerApp(worker_settings(nats_url, f"127.0.0.1:{sealing.port}")) as app:
        yield app


def replica_sealer(pool: asyncpg.Pool) -> Sealer:
    """Another replica's Sealer: the same KEK and key table, a cache of its own."""
    kek = LocalKeyEncryptionKey.from_config(TEST_DATA_KEK, "")
    return Sealer(DataKeyRepository(pool), kek)


async def erase(client: Client, user: str = USER, **options: bool) -> apb.EraseUserDataResponse:
    answer: apb.EraseUserDataResponse = await client.admin.EraseUserData(
        apb.EraseUserDataRequest(user_id=user, **options)
    )
    return answer


async def rows_of(db: asyncpg.Connection, user: str) -> dict[str, int]:
    return {table: await db.fetchval(query, user) for table, query in MINE.items()}


async def test_an_erased_user_is_gone_and_their_old_ciphertext_opens_no_more(
    client: Client, worker: WorkerApp, db: asyncpg.Connection, database_url: str
) -> None:
    created = await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id=USER, job_type="feynman_evaluation", input=struct_from_dict(MARKED_INPUT)
        )
    )
    parent, child = await feynman_flow(client, job_id=created.job.id)
    template = spb.JobTemplate(job_type="synthetic", input=struct_from_dict({"sleep_ms": 1}))
    await client.schedules.CreateSchedule(
        spb.CreateScheduleRequest(
            user_id=USER,
            spec=spb.ScheduleSpec(cron="0 0 1 1 *", job_template=template),
            paused=True,
        )
    )
    await client.credentials.PutCredential(
        cpb.PutCredentialRequest(user_id=USER, provider="openai", api_key="sk-leaving")
    )
    kept = (await client.create(OTHER, "synthetic", sleep_ms=1)).job
    usage_before = await db.fetchval(
        "SELECT coalesce(sum(input_tokens), 0) FROM usage_logs u JOIN jobs j ON j.id = u.job_id"
        " WHERE j.user_id = $1",
        USER,
    )
    # a ciphertext as a dump taken before the erase holds it, and proof that it opens now
    stolen = json.loads(
        await db.fetchval("SELECT payload FROM job_snapshots WHERE job_id = $1", parent.id)
    )
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    try:
        assert await replica_sealer(pool).open(USER, parent.id, INPUT, stolen) == MARKED_INPUT

        counted = await erase(client, dry_run=True)
        assert (counted.jobs, counted.schedules, counted.credentials) == (2, 1, 1)
        assert counted.artifacts >= 2 and counted.events >= 4 and counted.usage_records >= 1
        assert counted.data_key_destroyed and counted.unfinished == 0
        assert (await rows_of(db, USER))["jobs"] == 2  # a dry run changes nothing

        erased = await erase(client)
        assert (erased.jobs, erased.schedules, erased.credentials) == (2, 1, 1)
        assert erased.data_key_destroyed and erased.usage_records == counted.usage_records

        assert await rows_of(db, USER) == dict.fromkeys(MINE, 0)
        for job_id in (parent.id, child.id):
            with pytest.raises(grpc.aio.AioRpcError) as gone:
                await client.get(job_id, USER)
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        # the old ciphertext, with the KEK at hand, opens no more: its data key is gone
        with pytest.raises(PayloadUnreadable):
            await replica_sealer(pool).open(USER, parent.id, INPUT, stolen)
    finally:
        await pool.close()
    # accounting keeps its counters (folded from the per-call rows), nothing else
    folded = await db.fetchval(
        "SELECT coalesce(sum(input_tokens), 0) FROM usage_daily WHERE user_id = $1", USER
    )
    assert folded == usage_before > 0
    assert (await client.get(kept.id, OTHER)).id == kept.id  # another user's job stays
    # idempotent: nothing left to erase
    again = await erase(client)
    assert (again.jobs, again.schedules, again.data_key_destroyed) == (0, 0, False)


async def test_an_erase_refuses_while_the_users_jobs_run_unless_asked_to_cancel_them(
    client: Client, db: asyncpg.Connection
) -> None:
    queued = (await client.create(USER, "synthetic", sleep_ms=1)).job
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await erase(client)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "USER_HAS_RUNNING_JOBS" in str(refused.value.trailing_metadata())
    assert (await rows_of(db, USER))["user_data_keys"] == 1  # nothing destroyed
    assert (await client.get(queued.id, USER)).id == queued.id

    erased = await erase(client, cancel_running=True)  # a queued job ends as it is cancelled
    assert (erased.cancelled, erased.jobs, erased.unfinished) == (1, 1, 0)
    assert await rows_of(db, USER) == dict.fromkeys(MINE, 0)


async def test_a_running_job_is_cancelled_and_the_erase_waits_for_its_end(
    client: Client, db: asyncpg.Connection
) -> None:
    running = (await client.create(USER, "synthetic", sleep_ms=1)).job
    await client.lock(running.id)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await erase(client, cancel_running=True)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", running.id) == (
        "cancel_requested"
    )
    # the worker stops: the job ends cancelled, and the erase goes through
    await db.execute("UPDATE jobs SET status = 'cancelled' WHERE id = $1", running.id)
    erased = await erase(client, cancel_running=True)
    assert (erased.jobs, erased.cancelled) == (1, 0)


async def test_a_replica_that_cached_the_destroyed_key_seals_no_new_job_under_it(
    client: Client, database_url: str, nats_url: str
) -> None:
    async with (
        running_job_service(database_url, nats_url, data_kek=TEST_DATA_KEK) as other,
        open_channel(f"127.0.0.1:{other.port}") as channel,
    ):
        replica = Client(channel)
        await replica.create(USER, "synthetic", sleep_ms=1)  # the other replica caches the key
        await erase(client, cancel_running=True)  # this replica destroys it
        # the user's next job, created on the other replica within its cache's 30 s, is
        # sealed under a new key (the store's), not the destroyed one: it reads anywhere
        after = (await replica.create(USER, "synthetic", sleep_ms=7)).job
        assert dict_from_struct((await client.get(after.id, USER)).input)["sleep_ms"] == 7
