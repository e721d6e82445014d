"""Payloads sealed at rest (issue 44), against real PostgreSQL and NATS: a Feynman job whose
input carries a unique marker runs on a real worker (fake provider), with its review-card
child; a ``pg_dump`` of the database and every file of the JetStream store hold no byte of
the marker, while its owner reads input, output and artifacts back unchanged through
GetJob and WatchJob. Rows written before encryption still read, and a sealed value moved
to another job's row does not open."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

from devstack.embedded.nats import EmbeddedNats
from job_service.app import JobServiceApp
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import dict_from_struct
from tests.support.ai import FEYNMAN_INPUT, feynman_flow
from tests.support.stack import Client, open_channel, running_job_service, worker_settings
from worker_service.app import WorkerApp

# 32 bytes, URL-safe base64 (a test's own KEK)
TEST_DATA_KEK = "ZGF0YS1rZWstZm9yLXRoZS10ZXN0cy0zMi1ieXRlcyE="
# In the title (the output's summary, the result artifact, the child's input and title) and
# in the content (a key term the explanation misses: the weaknesses, the child's cards).
MARKER = "zqxmarkerb7e41c"
MARKED_INPUT = {
    **FEYNMAN_INPUT,
    "title": f"Photosynthesis {MARKER}",
    "content": f"The {MARKER} pathway: " + FEYNMAN_INPUT["content"],
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
    settings = worker_settings(nats_url, f"127.0.0.1:{sealing.port}")
    async with WorkerApp(settings) as app:
        yield app


def pg_dump(database_url: str) -> str:
    """The database as ``pg_dump`` writes it (schema and every row), from pgserver's own
    binaries (the server's version)."""
    spec = importlib.util.find_spec("pgserver")  # not imported: it warns on import
    assert spec is not None and spec.origin is not None
    binary = Path(spec.origin).parent / "pginstall" / "bin" / "pg_dump"
    done = subprocess.run(
        [str(binary), "--dbname", database_url], capture_output=True, text=True, check=True
    )
    return done.stdout


def store_bytes(store_dir: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in store_dir.rglob("*") if p.is_file()]


async def test_a_marked_feynman_job_leaves_no_plaintext_in_the_dump_or_the_nats_store(
    client: Client,
    worker: WorkerApp,
    database_url: str,
    nats_server: EmbeddedNats,
    db: asyncpg.Connection,
) -> None:
    created = await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="user-1",
            job_type="feynman_evaluation",
            input=_struct(MARKED_INPUT),
        )
    )
    watch = client.jobs.WatchJob(jpb.WatchJobRequest(job_id=created.job.id, user_id="user-1"))
    parent, child = await feynman_flow(client, job_id=created.job.id)
    async with asyncio.timeout(10):
        watched = [answer.job async for answer in watch]

    # the owner reads everything back, whole: input, output, artifacts, the child's input
    assert dict_from_struct(parent.input) == MARKED_INPUT
    output = dict_from_struct(parent.output)
    assert MARKER in output["summary"] and any(MARKER in w for w in output["weaknesses"])
    [result] = [a for a in parent.artifacts if a.artifact_type == "feynman_result"]
    assert dict_from_struct(result.payload)["summary"] == output["summary"]
    assert MARKER in dict_from_struct(child.input)["title"]
    assert child.status == job_pb2.JOB_STATUS_SUCCEEDED and MARKER in str(child.artifacts)
    assert watched[-1].status == job_pb2.JOB_STATUS_SUCCEEDED
    assert dict_from_struct(watched[-1].output) == output
    # ... and none of it is stored in the clear
    dump = pg_dump(database_url)
    assert created.job.id in dump  # the dump holds the job's rows
    assert MARKER not in dump
    assert "sealed:v1:" in dump
    assert await db.fetchval("SELECT count(*) FROM user_data_keys") == 1
    stored = store_bytes(nats_server.store_dir)
    assert stored, "the JetStream store holds files"
    assert [p for p, data in stored if MARKER.encode() in data] == []


async def test_a_row_written_before_encryption_still_reads(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create("user-1", "synthetic", sleep_ms=1)).job
    # as a job created before encryption stored it: plain JSON
    await db.execute(
        "UPDATE job_snapshots SET payload = $2::jsonb WHERE job_id = $1",
        job.id,
        json.dumps({"sleep_ms": 7}),
    )
    assert dict_from_struct((await client.get(job.id)).input) == {"sleep_ms": 7}


async def test_a_sealed_input_moved_to_another_job_does_not_open(
    client: Client, db: asyncpg.Connection
) -> None:
    first = (await client.create("user-1", "synthetic", sleep_ms=11)).job
    second = (await client.create("user-1", "synthetic", sleep_ms=22)).job
    await db.execute(
        "UPDATE job_snapshots SET payload = (SELECT payload FROM job_snapshots WHERE job_id = $1)"
        " WHERE job_id = $2",
        first.id,
        second.id,
    )
    assert dict_from_struct((await client.get(first.id)).input)["sleep_ms"] == 11
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.get(second.id)
    assert refused.value.code() == grpc.StatusCode.INTERNAL


async def test_a_signal_payload_is_sealed_and_its_worker_reads_it_back(
    client: Client, database_url: str, db: asyncpg.Connection
) -> None:
    job = (await client.create("user-1", "synthetic", sleep_ms=1)).job
    payload = {"note": f"approved {MARKER}", "edits": [MARKER, 3]}

    def send(body: dict[str, Any], key: str = "k1") -> Any:
        return client.jobs.SendSignal(
            jpb.SendSignalRequest(
                job_id=job.id,
                user_id="user-1",
                name="approve",
                payload=_struct(body),
                idempotency_key=key,
            )
        )

    first = await send(payload)
    again = await send(payload)  # the same signal again: recognised through the seal
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await send({**payload, "note": "changed"})

    assert first.created and not again.created and again.signal.seq == first.signal.seq
    assert reused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    stored = await db.fetchval("SELECT payload FROM job_signals WHERE job_id = $1", job.id)
    assert json.loads(stored).startswith("sealed:v1:")
    assert MARKER not in pg_dump(database_url)
    # the holder of the lease reads it back whole
    lease = (await client.lock(job.id)).job
    fetched = await client.executor.FetchSignals(
        epb.FetchSignalsRequest(job_id=job.id, lease_token=lease.lease_token)
    )
    assert [(s.seq, s.name, dict_from_struct(s.payload)) for s in fetched.signals] == [
        (1, "approve", payload)
    ]
    # bound to its job: moved to another job's signal, it does not open
    other = (await client.create("user-1", "synthetic", sleep_ms=1)).job
    await send_plain_signal(db, other.id, stored)
    other_lease = (await client.lock(other.id)).job
    with pytest.raises(grpc.aio.AioRpcError) as unreadable:
        await client.executor.FetchSignals(
            epb.FetchSignalsRequest(job_id=other.id, lease_token=other_lease.lease_token)
        )
    assert unreadable.value.code() == grpc.StatusCode.INTERNAL


async def send_plain_signal(db: asyncpg.Connection, job_id: str, payload_json: str) -> None:
    """A signal row written straight into the table, ``payload_json`` as its jsonb."""
    await db.execute(
        "WITH n AS (UPDATE jobs SET signal_seq = signal_seq + 1 WHERE id = $1 RETURNING signal_seq)"
        " INSERT INTO job_signals (job_id, seq, name, payload)"
        " SELECT $1, signal_seq, 'approve', $2::jsonb FROM n",
        job_id,
        payload_json,
    )


async def test_a_signal_stored_before_encryption_still_reads(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create("user-1", "synthetic", sleep_ms=1)).job
    await send_plain_signal(db, job.id, json.dumps({"n": 1}))
    lease = (await client.lock(job.id)).job
    fetched = await client.executor.FetchSignals(
        epb.FetchSignalsRequest(job_id=job.id, lease_token=lease.lease_token)
    )
    assert [dict_from_struct(s.payload) for s in fetched.signals] == [{"n": 1}]


async def test_a_schedule_template_input_is_sealed_and_read_back_unchanged(
    client: Client, database_url: str, db: asyncpg.Connection
) -> None:
    marked = {"sleep_ms": 1, "wait_signals": [MARKER]}

    def create(template_input: dict[str, Any]) -> Any:
        spec = spb.ScheduleSpec(
            cron="0 3 * * *",
            job_template=spb.JobTemplate(job_type="synthetic", input=_struct(template_input)),
        )
        request = spb.CreateScheduleRequest(user_id="user-1", spec=spec, idempotency_key="s1")
        return client.schedules.CreateSchedule(request)

    made = await create(marked)
    again = await create(marked)  # recognised by its keyed request hash
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await create({**marked, "sleep_ms": 2})
    schedule_id = made.schedule.id

    assert made.created and not again.created and again.schedule.id == schedule_id
    assert reused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    ids = {"schedule_id": schedule_id, "user_id": "user-1"}
    got = await client.schedules.GetSchedule(spb.GetScheduleRequest(**ids))
    listed = await client.schedules.ListSchedules(spb.ListSchedulesRequest(user_id="user-1"))
    triggered = await client.schedules.TriggerSchedule(spb.TriggerScheduleRequest(**ids))
    for schedule in (made.schedule, again.schedule, got.schedule, *listed.schedules):
        assert dict_from_struct(schedule.spec.job_template.input) == marked
    job_input = dict_from_struct((await client.get(triggered.job.id)).input)
    assert job_input["wait_signals"] == [MARKER]
    stored = await db.fetchval("SELECT input FROM schedules WHERE id = $1", schedule_id)
    assert json.loads(stored).startswith("sealed:v1:")
    assert MARKER not in pg_dump(database_url)


async def test_an_internal_error_message_is_sealed_and_admins_read_it_back(
    client: Client, database_url: str, db: asyncpg.Connection
) -> None:
    detail = f"ValueError: could not parse {MARKER} in the answer"
    job = (await client.create("user-1", "synthetic", sleep_ms=1)).job
    lease = await client.lock(job.id)
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id,
            lease_token=lease.job.lease_token,
            error_code="JOB_REJECTED",
            error_message=detail,
        )
    )

    viewed = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job
    listed = (await client.admin.ListJobs(apb.AdminListJobsRequest(user_id="user-1"))).jobs
    assert viewed.status == job_pb2.JOB_STATUS_FAILED
    assert viewed.internal_error_message == detail
    assert [j.internal_error_message for j in listed] == [detail]
    stored = await db.fetchval("SELECT internal_error_message FROM jobs WHERE id = $1", job.id)
    assert stored.startswith("sealed:v1:")
    assert MARKER not in pg_dump(database_url)


def _struct(value: dict[str, Any]) -> Any:
    from shared.pbconv import struct_from_dict

    return struct_from_dict(value)


async def test_jobctl_and_the_console_read_a_sealed_job_back_unchanged(
    sealing: JobServiceApp, client: Client, db: asyncpg.Connection
) -> None:
    import io

    import httpx
    from durable_jobs_client import AsyncJobsClient

    from console.app import Console
    from console.settings import ConsoleSettings
    from jobctl.cli import parse
    from tests.integration.test_console import http, sign_in
    from tests.support.stack import ALL_ROLES_TOKEN, result_request

    job = (await client.create("user-1", "synthetic", sleep_ms=3)).job
    lease = await client.lock(job.id)
    output, artifact = {"attempt": 1, "data": MARKER}, {"note": f"artifact {MARKER}"}
    await client.executor.SubmitResult(
        result_request(job.id, lease.job.lease_token, output, artifact)
    )
    assert MARKER not in str(await db.fetch("SELECT * FROM jobs WHERE id = $1", job.id))
    target = f"127.0.0.1:{sealing.port}"

    args = parse(["get", job.id, "--user", "user-1", "-o", "json"])
    out = io.StringIO()
    async with AsyncJobsClient(target, user_id="user-1", token=ALL_ROLES_TOKEN) as jobs:
        await args.run(args, jobs, out)
    shown = json.loads(out.getvalue())
    shown = shown.get("job", shown)
    assert shown["input"]["sleep_ms"] == 3
    assert shown["output"] == output
    assert shown["artifacts"][0]["payload"] == artifact

    console = Console(ConsoleSettings(job_service_target=target))
    app = console.app()
    async with console.lifespan(app):
        console.asgi = app  # type: ignore[attr-defined]
        web: httpx.AsyncClient
        async with http(console) as web:
            assert (await sign_in(web)).status_code == 303
            page = (await web.get(f"/jobs/{job.id}")).text
    assert f"artifact {MARKER}" in page and f'"data": "{MARKER}"' in page.replace("&#34;", '"')
    assert '"sleep_ms": 3' in page.replace("&#34;", '"')
