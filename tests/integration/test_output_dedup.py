"""Output dedup by hash (seed 000 §5.6), in the cases that apply to this engine:

* the same job's result submitted again with the same output hash returns the existing
  result and writes nothing (no second artifact, child, usage row, event or outbox row):
  the repeated projection is skipped;
* the same job's result with a different hash after the first committed is refused
  (LEASE_LOST) and the first result stands;
* the same input with the same idempotency key returns the existing job and its result.

Same input *without* a key is a new job and runs again: model answers differ between runs,
and a user asking twice asks for a fresh answer (docs/architecture.md explains)."""

from __future__ import annotations

from typing import Any

import asyncpg
import grpc
import pytest

from job_service.adapters.postgres.pool import init_connection
from shared.canonical import content_hash
from shared.errors import LeaseLost
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.ai import FEYNMAN_INPUT, worker_result
from tests.support.stack import Client

TABLES = ("jobs", "job_artifacts", "job_events", "job_snapshots", "outbox_events", "usage_logs")


@pytest.fixture(autouse=True)
async def jsonb_as_values(db: asyncpg.Connection) -> None:
    await init_connection(db)


async def everything(db: asyncpg.Connection) -> dict[str, list[Any]]:
    """Every row the engine wrote, by table (outbox rows without their publishing state)."""
    found = {}
    for table in TABLES:
        columns = "id, event_type, dedupe_key, payload" if table == "outbox_events" else "*"
        rows = await db.fetch(f"SELECT {columns} FROM {table} ORDER BY 1")
        found[table] = [dict(r) for r in rows]
    return found


async def test_the_same_output_hash_submitted_again_returns_the_result_and_skips_the_projection(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    request = await worker_result((await client.lock(parent.id)).job)
    first = await client.executor.SubmitResult(request)
    after_first = await everything(db)

    again = await client.executor.SubmitResult(request)

    assert first.status == again.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert await everything(db) == after_first
    assert len(after_first["usage_logs"]) == 1
    assert [str(r["parent_job_id"]) for r in after_first["jobs"] if r["parent_job_id"]] == [
        parent.id
    ]


async def test_a_different_output_hash_after_the_result_is_refused_and_the_first_stands(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    request = await worker_result((await client.lock(parent.id)).job)
    await client.executor.SubmitResult(request)
    after_first = await everything(db)
    other = {**dict_from_struct(request.output), "summary": "another answer"}
    request.output.CopyFrom(struct_from_dict(other))
    request.output_hash = content_hash(other)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.executor.SubmitResult(request)

    assert isinstance(error_from_rpc(raised.value), LeaseLost)
    assert await everything(db) == after_first
    assert (await client.get(parent.id)).output["summary"] != "another answer"


async def test_the_same_input_and_idempotency_key_returns_the_existing_result(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="feynman_evaluation", key="eval-1", **FEYNMAN_INPUT)).job
    await client.executor.SubmitResult(await worker_result((await client.lock(job.id)).job))
    stored = await client.get(job.id)

    repeat = await client.create(job_type="feynman_evaluation", key="eval-1", **FEYNMAN_INPUT)

    assert repeat.job.id == job.id
    assert repeat.job.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert repeat.job.output_hash == stored.output_hash != ""
    assert dict(repeat.job.output) == dict(stored.output)
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE job_type = 'feynman_evaluation'") == 1
