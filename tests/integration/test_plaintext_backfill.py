"""Rows written before encryption (issue 44), against real PostgreSQL and NATS: jobs made by
a job service without a KEK (the previous release: plaintext inputs, outputs, artifacts,
steps, signals, a schedule, an internal error message) are sealed by the backfill in
bounded batches, its metrics counting what is left and what it sealed; a job service with
the KEK then reads them back unchanged, and a repeat of an old request (a job's, a
schedule's) still finds its row."""

from __future__ import annotations

import json

import asyncpg

from job_service import sealing_metrics as metrics
from job_service.adapters.local_kek import LocalKeyEncryptionKey
from job_service.adapters.postgres.backfill import BackfillRepository
from job_service.adapters.postgres.data_keys import DataKeyRepository
from job_service.adapters.postgres.pool import create_pool
from job_service.usecases.backfill import PlaintextBackfill
from job_service.usecases.sealing import Sealer
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import dict_from_struct, struct_from_dict
from tests.integration.test_payload_encryption import TEST_DATA_KEK
from tests.support.stack import Client, open_channel, result_request, running_job_service

TABLES = (
    "job_snapshots",
    "jobs",
    "job_artifacts",
    "job_steps",
    "job_signals",
    "schedules",
    "jobs.internal_error_message",
)
SECRET = "old-plaintext-7f3a"
SCHEDULED = {"sleep_ms": 5, "wait_signals": [SECRET]}


def left(table: str) -> float:
    return metrics.PLAINTEXT_PAYLOADS_LEFT.labels(table)._value.get()  # type: ignore[no-any-return]


def backfilled(table: str) -> float:
    return metrics.PAYLOADS_BACKFILLED.labels(table)._value.get()  # type: ignore[no-any-return]


async def test_old_plaintext_rows_are_sealed_in_batches_and_read_back_unchanged(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    # the previous release: no KEK, everything in the clear
    async with (
        running_job_service(database_url, nats_url) as plain,
        open_channel(f"127.0.0.1:{plain.port}") as channel,
    ):
        client = Client(channel)
        jobs = [
            (await client.create("user-1", "synthetic", key=f"k{i}", sleep_ms=i)).job
            for i in range(3)
        ]
        await client.jobs.SendSignal(
            jpb.SendSignalRequest(
                job_id=jobs[0].id,
                user_id="user-1",
                name="approve",
                payload=struct_from_dict({"note": SECRET}),
            )
        )
        schedule = (await create_schedule(client)).schedule
        for i, job in enumerate(jobs):
            lease = await client.lock(job.id)
            await client.executor.SubmitResult(
                result_request(
                    job.id, lease.job.lease_token, {"attempt": i, "data": SECRET}, {"n": i}
                )
            )
    await db.execute(
        "INSERT INTO job_steps (job_id, step, attempt, call_id, response_text, response_parsed,"
        " provider, model) VALUES ($1, 'draft', 1, 'c1', $2, '{\"a\": 1}', 'fake', 'm')",
        jobs[0].id,
        f"the draft says {SECRET}",
    )
    # an attempt's detail as the previous release stored it (an earlier failed attempt)
    await db.execute(
        "UPDATE jobs SET internal_error_message = $2 WHERE id = $1", jobs[2].id, f"boom {SECRET}"
    )
    assert await db.fetchval("SELECT count(*) FROM user_data_keys") == 0

    pool = await create_pool(database_url, 2)
    try:
        sealer = Sealer(
            DataKeyRepository(pool), LocalKeyEncryptionKey.from_config(TEST_DATA_KEK, "")
        )
        backfill = PlaintextBackfill(BackfillRepository(pool), sealer, batch=2)
        before = {t: backfilled(t) for t in TABLES}
        assert await backfill.seal_round() == 2  # a bounded batch: 2 of the 3 inputs
        assert left("job_snapshots") == 1 and left("job_artifacts") == 1 and left("job_steps") == 0
        assert left("job_signals") == 0
        assert await backfill.seal_round() == 1
        assert {t: left(t) for t in TABLES} == dict.fromkeys(TABLES, 0)
        assert {t: backfilled(t) - before[t] for t in TABLES} == {
            "job_snapshots": 3,
            "jobs": 3,
            "job_artifacts": 3,
            "job_steps": 1,
            "job_signals": 1,
            "schedules": 1,
            "jobs.internal_error_message": 1,
        }
        assert await backfill.seal_round() == 0  # done: it stops looking
        stored = await db.fetchval("SELECT payload FROM job_signals")
        signal = await sealer.open("user-1", jobs[0].id, "signal/approve", json.loads(stored))
        assert signal == {"note": SECRET}
    finally:
        await pool.close()
    dump = "\n".join(
        [
            str(r)
            for q in (
                "SELECT payload FROM job_snapshots",
                "SELECT validated_output FROM jobs",
                "SELECT payload FROM job_artifacts",
                "SELECT response_text FROM job_steps",
                "SELECT payload FROM job_signals",
                "SELECT input FROM schedules",
                "SELECT internal_error_message FROM jobs",
            )
            for r in await db.fetch(q)
        ]
    )
    assert SECRET not in dump and "sleep_ms" not in dump

    # the next release, with the KEK: every row reads as it was written
    async with (
        running_job_service(database_url, nats_url, data_kek=TEST_DATA_KEK) as sealed,
        open_channel(f"127.0.0.1:{sealed.port}") as channel,
    ):
        client = Client(channel)
        for i, job in enumerate(jobs):
            read = await client.get(job.id)
            assert dict_from_struct(read.input)["sleep_ms"] == i
            assert dict_from_struct(read.output) == {"attempt": i, "data": SECRET}
            assert dict_from_struct(read.artifacts[0].payload) == {"n": i}
        admin_view = await client.admin.GetJob(apb.AdminGetJobRequest(job_id=jobs[2].id))
        assert admin_view.job.internal_error_message == f"boom {SECRET}"
        # a repeat of an old request finds its job (its request hash keyed, not lost)
        again = (await client.create("user-1", "synthetic", key="k1", sleep_ms=1)).job
        assert again.id == jobs[1].id
        # the schedule reads back, and a repeat of its old request finds it (a plain hash)
        ids = {"schedule_id": schedule.id, "user_id": "user-1"}
        got = await client.schedules.GetSchedule(spb.GetScheduleRequest(**ids))
        assert dict_from_struct(got.schedule.spec.job_template.input) == SCHEDULED
        repeated = await create_schedule(client)
        assert not repeated.created and repeated.schedule.id == schedule.id


async def create_schedule(client: Client) -> spb.CreateScheduleResponse:
    spec = spb.ScheduleSpec(
        cron="0 3 * * *",
        job_template=spb.JobTemplate(job_type="synthetic", input=struct_from_dict(SCHEDULED)),
    )
    request = spb.CreateScheduleRequest(user_id="user-1", spec=spec, idempotency_key="s1")
    answer: spb.CreateScheduleResponse = await client.schedules.CreateSchedule(request)
    return answer
