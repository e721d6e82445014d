"""SendSignal and FetchSignals against real PostgreSQL and NATS: stored first and numbered
in send order, idempotent by key, refused once the job has finished, shown to the owner
without payloads, handed to the holder of the lease only, announced on core NATS and by
the heartbeat."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import grpc
import pytest
from nats.aio.client import Client as NatsClient
from prometheus_client import REGISTRY

from shared.constants import SIGNAL_SUBJECT
from shared.errors import IdempotencyKeyReused, JobFinished, LeaseLost
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client, result_request


async def send(
    client: Client,
    job_id: str,
    name: str = "approve",
    payload: dict[str, Any] | None = None,
    key: str = "",
    user_id: str = "user-1",
) -> jpb.SendSignalResponse:
    return await client.jobs.SendSignal(
        jpb.SendSignalRequest(
            job_id=job_id,
            user_id=user_id,
            name=name,
            payload=struct_from_dict(payload or {}),
            idempotency_key=key,
        )
    )


async def fetch(
    client: Client, job_id: str, token: str, after_seq: int = 0
) -> list[tuple[int, str, dict[str, Any]]]:
    answer = await client.executor.FetchSignals(
        epb.FetchSignalsRequest(job_id=job_id, lease_token=token, after_seq=after_seq)
    )
    assert not answer.more
    return [(s.seq, s.name, dict_from_struct(s.payload)) for s in answer.signals]


def sent_count() -> float:
    """jobs_signals_sent_total of synthetic jobs (the job service runs in this process)."""
    return REGISTRY.get_sample_value("jobs_signals_sent_total", {"job_type": "synthetic"}) or 0.0


async def refused(call: Any) -> Exception:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return error_from_rpc(raised.value)


async def test_a_signal_is_stored_numbered_and_shown_to_the_owner_without_its_payload(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job

    first = await send(client, job.id, "approve", {"by": "ada", "secret": "s3"})
    second = await send(client, job.id, "edit", {"text": "new"})

    assert (first.signal.seq, first.signal.name, first.created) == (1, "approve", True)
    assert (second.signal.seq, second.signal.name) == (2, "edit")
    shown = (await client.get(job.id)).signals
    assert [(s.seq, s.name) for s in shown] == [(1, "approve"), (2, "edit")]
    assert shown[0].sent_at.ToDatetime() <= shown[1].sent_at.ToDatetime()
    assert "s3" not in str(await client.get(job.id))  # payloads are for job code only
    rows = await db.fetch("SELECT seq, name, payload FROM job_signals ORDER BY seq")
    assert [(r["seq"], r["name"], json.loads(r["payload"])) for r in rows] == [
        (1, "approve", {"by": "ada", "secret": "s3"}),
        (2, "edit", {"text": "new"}),
    ]
    assert await db.fetchval("SELECT signal_seq FROM jobs WHERE id = $1", job.id) == 2


async def test_concurrent_sends_get_distinct_seqs_in_commit_order(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job

    answers = await asyncio.gather(*(send(client, job.id, f"s{i}") for i in range(20)))

    assert sorted(a.signal.seq for a in answers) == list(range(1, 21))
    assert await db.fetchval("SELECT count(*) FROM job_signals") == 20


async def test_a_repeated_key_answers_the_stored_signal_and_stores_nothing(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    other = (await client.create()).job
    counted = sent_count()

    first = await send(client, job.id, "approve", {"v": 1}, key="k1")
    again = await asyncio.gather(
        *(send(client, job.id, "approve", {"v": 1}, key="k1") for _ in range(5))
    )
    elsewhere = await send(client, other.id, "approve", {"v": 1}, key="k1")

    assert all(a.signal.seq == 1 and not a.created for a in again)
    assert all(a.signal.sent_at == first.signal.sent_at for a in again)
    assert elsewhere.created  # a key is per job
    assert sent_count() == counted + 2  # repeats are not counted
    assert await db.fetchval("SELECT count(*) FROM job_signals WHERE job_id = $1", job.id) == 1
    reused = await refused(send(client, job.id, "approve", {"v": 2}, key="k1"))
    assert isinstance(reused, IdempotencyKeyReused)
    assert await db.fetchval("SELECT count(*) FROM job_signals WHERE job_id = $1", job.id) == 1


async def test_a_finished_job_takes_no_signal_but_answers_a_repeated_key(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    await send(client, job.id, "approve", key="k1")
    lease = (await client.lock(job.id)).job
    await client.executor.SubmitResult(
        result_request(job.id, lease.lease_token, {"attempt": 1, "data": "x"})
    )

    error = await refused(send(client, job.id, "approve"))

    assert isinstance(error, JobFinished)
    assert "finished" in error.message and "succeeded" in error.message
    assert error.metadata == {"job_id": job.id, "status": "succeeded"}
    assert (await send(client, job.id, "approve", key="k1")).signal.seq == 1
    assert await db.fetchval("SELECT count(*) FROM job_signals") == 1
    assert await db.fetchval("SELECT signal_seq FROM jobs") == 1


async def test_a_running_job_is_told_at_once_and_fetches_under_its_lease(
    client: Client, nats_client: NatsClient
) -> None:
    notices: asyncio.Queue[bytes] = asyncio.Queue()

    async def on_notice(msg) -> None:  # type: ignore[no-untyped-def]
        await notices.put(msg.data)

    await nats_client.subscribe(SIGNAL_SUBJECT, cb=on_notice)
    await nats_client.flush()
    job = (await client.create()).job
    await send(client, job.id, "early", {"n": 1})  # before it runs: no notice
    lease = (await client.lock(job.id)).job

    await send(client, job.id, "approve", {"n": 2})

    assert json.loads(await asyncio.wait_for(notices.get(), 5)) == {"job_id": job.id, "seq": 2}
    assert notices.empty()
    assert await fetch(client, job.id, lease.lease_token) == [
        (1, "early", {"n": 1}),
        (2, "approve", {"n": 2}),
    ]
    assert await fetch(client, job.id, lease.lease_token, after_seq=1) == [(2, "approve", {"n": 2})]
    beat = await client.executor.Heartbeat(
        epb.HeartbeatRequest(job_id=job.id, lease_token=lease.lease_token, progress=-1)
    )
    assert beat.latest_signal_seq == 2


async def test_a_retried_attempt_fetches_every_signal_and_the_old_lease_none(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    first = (await client.lock(job.id)).job
    await send(client, job.id, "a")
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id, lease_token=first.lease_token, error_code="PROVIDER_UNAVAILABLE"
        )
    )
    await send(client, job.id, "b")  # while it waits for its retry
    await db.execute("UPDATE jobs SET next_run_at = now() WHERE id = $1", job.id)
    second = (await client.lock(job.id)).job

    assert [name for _, name, _ in await fetch(client, job.id, second.lease_token)] == ["a", "b"]
    assert isinstance(
        await refused(
            client.executor.FetchSignals(
                epb.FetchSignalsRequest(job_id=job.id, lease_token=first.lease_token)
            )
        ),
        LeaseLost,
    )
