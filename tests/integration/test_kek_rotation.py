"""KEK rotation under load (issue 44), against real PostgreSQL and NATS: users' data keys
wrapped under KEK A; the job service restarted with B current and A retired while jobs are
created and run; every job succeeds, every data key ends wrapped under B (the re-wrap loop,
``jobs_data_keys_to_rewrap`` at 0), and what was sealed before the rotation still reads."""

from __future__ import annotations

import asyncio

import asyncpg

from job_service.adapters.local_kek import kek_id
from job_service.domain.credentials import parse_master_key
from job_service.sealing_metrics import DATA_KEYS_TO_REWRAP
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import dict_from_struct
from tests.support.stack import Client, open_channel, running_job_service, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp

KEK_A = "a2VrLWEtZm9yLXRoZS1yb3RhdGlvbi10ZXN0LTMyYiE="
KEK_B = "a2VrLWItZm9yLXRoZS1yb3RhdGlvbi10ZXN0LTMyYiE="
USERS = 40


async def test_a_kek_rotation_under_load_fails_no_job_and_rewraps_every_key(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url, data_kek=KEK_A) as first,
        open_channel(f"127.0.0.1:{first.port}") as channel,
    ):
        client = Client(channel)
        before = [
            (await client.create(f"user-{n}", "synthetic", sleep_ms=n)).job for n in range(USERS)
        ]
    assert await db.fetchval("SELECT count(*) FROM user_data_keys") == USERS

    new_id = kek_id(parse_master_key(KEK_B))
    async with running_job_service(
        database_url, nats_url, data_kek=KEK_B, data_retired_keks=KEK_A
    ) as app:
        target = f"127.0.0.1:{app.port}"
        async with (
            open_channel(target) as channel,
            WorkerApp(worker_settings(nats_url, target)) as _worker,
        ):
            client = Client(channel)
            # load while the keys are re-wrapped: new jobs of the same users and new ones
            during = await asyncio.gather(
                *(client.create(f"user-{n}", "synthetic", sleep_ms=1) for n in range(USERS * 2))
            )
            jobs = [*before, *(c.job for c in during)]

            async def all_ended() -> bool:
                statuses = [(await client.get(j.id, j.user_id)).status for j in jobs]
                return all(s in _ENDED for s in statuses)

            await eventually(all_ended, timeout=60, message="jobs did not end")
            ended = [await client.get(j.id, j.user_id) for j in jobs]
            assert [j.id for j in ended if j.status != job_pb2.JOB_STATUS_SUCCEEDED] == []
            # sealed under A before the rotation, read under B
            first = await client.get(before[7].id, "user-7")
            assert dict_from_struct(first.input)["sleep_ms"] == 7

            async def rewrapped() -> bool:
                left = await db.fetchval(
                    "SELECT count(*) FROM user_data_keys WHERE kek_id <> $1", new_id
                )
                return bool(left == 0 and DATA_KEYS_TO_REWRAP._value.get() == 0)

            await eventually(rewrapped, timeout=30, message="keys left to re-wrap")
    assert await db.fetchval("SELECT count(*) FROM user_data_keys") == USERS * 2
    assert (
        await db.fetchval("SELECT count(*) FROM user_data_keys WHERE rewrapped_at IS NOT NULL")
        == USERS
    )


_ENDED = (
    job_pb2.JOB_STATUS_SUCCEEDED,
    job_pb2.JOB_STATUS_FAILED,
    job_pb2.JOB_STATUS_CANCELLED,
)
