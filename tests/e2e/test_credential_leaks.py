"""A user's provider key goes in through PutCredential and out only to the worker holding
the job's lease: it appears in no log line (job service and worker process, at DEBUG), no
NATS message, no database column, no error message and no API response."""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from collections.abc import Callable

import asyncpg
import grpc
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from shared.credentials import fingerprint
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.processes import WorkerProcess
from tests.support.stack import Client
from tests.support.wait import eventually

S = job_pb2


def leaks(text: str | bytes, secret: str) -> bool:
    """The secret, as text or as the hex PostgreSQL shows bytea in."""
    raw = text if isinstance(text, bytes) else text.encode(errors="replace")
    return secret.encode() in raw or secret.encode().hex().encode() in raw.lower()


async def every_row_as_text(db: asyncpg.Connection) -> dict[str, list[str]]:
    """Each row of each table as PostgreSQL's text form (every column, jsonb and bytea
    included)."""
    tables = await db.fetch(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
    )
    return {
        t["table_name"]: [
            r["row"] for r in await db.fetch(f'SELECT t::text AS row FROM "{t["table_name"]}" t')
        ]
        for t in tables
    }


async def finished(client: Client, job_id: str) -> job_pb2.Job:
    async def terminal() -> job_pb2.Job | None:
        job = await client.get(job_id)
        done = (S.JOB_STATUS_SUCCEEDED, S.JOB_STATUS_FAILED, S.JOB_STATUS_CANCELLED)
        return job if job.status in done else None

    return await eventually(terminal, timeout=20, message=f"job {job_id} did not finish")


@pytest.mark.slow
async def test_a_users_key_never_leaks(
    client: Client,
    db: asyncpg.Connection,
    nats_client: NatsClient,
    spawn_worker: Callable[..., WorkerProcess],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    secret = f"sk-leak-canary-{uuid.uuid4().hex}"
    caplog.set_level(logging.DEBUG)
    seen: list[Msg] = []

    async def capture(msg: Msg) -> None:
        seen.append(msg)

    await nats_client.subscribe(">", cb=capture)  # every message through the server
    worker = spawn_worker("leak-worker", JOBS_LOG_LEVEL="DEBUG")
    errors: list[str] = []
    responses: list[bytes] = []

    put = await client.credentials.PutCredential(
        cpb.PutCredentialRequest(user_id="user-1", provider="deepseek", api_key=secret)
    )
    credential_id = put.credential.id
    responses.append(put.SerializeToString())
    with pytest.raises(grpc.aio.AioRpcError) as bad_put:  # refused input is not quoted back
        await client.credentials.PutCredential(
            cpb.PutCredentialRequest(user_id="user-1", provider="deepseek", api_key=secret + " x")
        )
    errors.append(str(bad_put.value))

    def create(**job_input: object) -> jpb.CreateJobRequest:
        return jpb.CreateJobRequest(
            user_id="user-1",
            job_type="synthetic",
            input=struct_from_dict(job_input),
            credential_mode=S.CREDENTIAL_MODE_USER,
            credential_id=credential_id,
        )

    ok = (await client.jobs.CreateJob(create(sleep_ms=10))).job
    fatal = (await client.jobs.CreateJob(create(fail="fatal"))).job
    succeeded, failed = await finished(client, ok.id), await finished(client, fatal.id)

    # the worker did obtain the key (its fingerprint is in the artifact), and ran with it
    assert succeeded.status == S.JOB_STATUS_SUCCEEDED
    assert succeeded.artifacts[0].payload["api_key"] == fingerprint(secret)
    assert failed.status == S.JOB_STATUS_FAILED
    with pytest.raises(grpc.aio.AioRpcError) as stale:  # a finished job's lease is not current
        await client.executor.ResolveCredential(
            epb.ResolveCredentialRequest(job_id=ok.id, lease_token=str(uuid.uuid4()))
        )
    errors.append(str(stale.value))
    responses += [(await client.get(j.id)).SerializeToString() for j in (ok, fatal)]
    listed = await client.credentials.ListCredentials(cpb.ListCredentialsRequest(user_id="user-1"))
    responses.append(listed.SerializeToString())
    worker.signal(signal.SIGTERM)
    assert await worker.wait(30) == 0
    await nats_client.flush()

    # what was looked at is really there: the test could have seen a leak
    worker_log = worker.log()
    assert ok.id in worker_log and "DEBUG" in worker_log
    assert any(ok.id.encode() in m.data for m in seen)
    assert any(r.name.startswith("job_service") for r in caplog.records)
    rows = await every_row_as_text(db)
    assert {"jobs", "job_snapshots", "job_events", "outbox_events", "credentials"} <= set(rows)
    assert any(credential_id in row for row in rows["credentials"])
    assert len(errors) == 2 and len(responses) == 4

    assert not leaks(worker_log, secret)
    assert not leaks(caplog.text, secret)
    assert not [r for r in caplog.records if leaks(r.getMessage() + str(r.exc_text), secret)]
    assert not leaks("".join(capfd.readouterr()), secret)
    assert not [m.subject for m in seen if leaks(m.data, secret) or leaks(str(m.headers), secret)]
    assert not {table: r for table, r in rows.items() for row in r if leaks(row, secret)}
    assert not [e for e in errors if leaks(e, secret)]
    assert not [r for r in responses if leaks(r, secret)]
    # and the streams still holding messages hold none with it
    js = nats_client.jetstream()
    for stream in await js.streams_info():
        for seq in range(stream.state.first_seq, stream.state.last_seq + 1):
            with_data = await asyncio.wait_for(js.get_msg(stream.config.name, seq), 5)
            assert not leaks(with_data.data or b"", secret)
