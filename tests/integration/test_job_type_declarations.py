"""Issue 41: workers declare their job types (ExecutorService.DeclareJobType), over gRPC
with the worker's token. The same spec again is taken (who declared it first stays, who
declared it last is updated, ListJobDefinitions shows both); another spec for a stored
(type, version) is FAILED_PRECONDITION naming exactly the fields that differ, and a
malformed one INVALID_ARGUMENT naming its fields, both writing nothing; a worker whose
type is refused logs it and runs nothing of it; a type declared at one replica is taken by
CreateJob at another at once."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest

from job_service.app import JobServiceApp
from jobtypes import synthetic
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import executor_service_pb2_grpc, job_pb2
from shared.pb.jobs.v1 import job_type_pb2 as tpb
from shared.registry import Registry
from tests.support.bad_input import reasons, violated_fields
from tests.support.stack import (
    WORKER_TOKEN,
    Client,
    count_rows,
    open_channel,
    settings,
    worker_settings,
)
from tests.support.wait import eventually
from worker_service.app import WorkerApp

DECLARE = "/jobs.v1.ExecutorService/DeclareJobType"
TEAM = dataclasses.replace(synthetic.DEFINITION, job_type="team_notes", version="1")
ROW = """
SELECT spec, first_declared_by, first_declared_at, last_declared_by, last_declared_at
FROM job_type_specs WHERE job_type = $1 AND version = $2
"""


@pytest.fixture
async def executor(target: str) -> AsyncIterator[Any]:
    """ExecutorService as a worker calls it: with the worker's token."""
    async with open_channel(target, WORKER_TOKEN) as channel:
        yield executor_service_pb2_grpc.ExecutorServiceStub(channel)  # type: ignore[no-untyped-call]


async def declare(executor: Any, worker_id: str, spec: tpb.JobTypeSpec) -> Any:
    return await executor.DeclareJobType(epb.DeclareJobTypeRequest(worker_id=worker_id, spec=spec))


async def definitions_of(client: Client, job_type: str) -> list[apb.JobDefinitionInfo]:
    listed = await client.admin.ListJobDefinitions(apb.ListJobDefinitionsRequest())
    return [d for d in listed.definitions if d.job_type == job_type]


async def test_the_same_spec_declared_again_is_taken_and_keeps_who_declared_it_first(
    executor: Any, client: Client, db: asyncpg.Connection
) -> None:
    spec = spec_of(TEAM)
    first = await declare(executor, "worker-first", spec)
    stored = await _row(db, "team_notes", "1")
    # the same spec, its schemas spaced and ordered otherwise: JSON documents compared
    again = tpb.JobTypeSpec()
    again.CopyFrom(spec)
    again.input_schema_json = json.dumps(json.loads(spec.input_schema_json), indent=2)
    second = await declare(executor, "worker-second", again)

    assert first.first_declared_by == second.first_declared_by == "worker-first"
    assert second.first_declared_at == first.first_declared_at
    row = await _row(db, "team_notes", "1")
    assert row["spec"] == stored["spec"]  # the stored spec is the first one, unchanged
    assert (row["first_declared_by"], row["first_declared_at"]) == (
        "worker-first",
        stored["first_declared_at"],
    )
    assert row["last_declared_by"] == "worker-second"
    assert row["last_declared_at"] > stored["last_declared_at"]
    [shown] = await definitions_of(client, "team_notes")
    assert (shown.version, shown.current) == ("1", True)
    assert (shown.first_declared_by, shown.last_declared_by) == ("worker-first", "worker-second")
    assert shown.first_declared_at.ToDatetime() < shown.last_declared_at.ToDatetime()
    assert shown.timeout_seconds == TEAM.timeout_s
    assert json.loads(shown.input_schema_json) == json.loads(spec.input_schema_json)


async def test_another_spec_for_a_stored_version_is_refused_naming_the_fields_that_differ(
    executor: Any, client: Client, db: asyncpg.Connection, database_url: str
) -> None:
    await declare(executor, "worker-first", spec_of(TEAM))
    changed = dataclasses.replace(TEAM, timeout_s=TEAM.timeout_s + 5, max_attempts=2)
    stored = await _row(db, "team_notes", "1")
    before = await count_rows(database_url)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await declare(executor, "worker-other", spec_of(changed))

    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reasons(refused.value, DECLARE) == ["JOB_TYPE_SPEC_CONFLICT"]
    assert violated_fields(refused.value) == "spec.timeout_seconds,spec.max_attempts"
    assert "team_notes@1 was declared differently by worker-first" in str(refused.value.details())
    assert await _row(db, "team_notes", "1") == stored  # not even last_declared_*
    assert await count_rows(database_url) == before
    [shown] = await definitions_of(client, "team_notes")
    assert (shown.timeout_seconds, shown.max_attempts) == (TEAM.timeout_s, TEAM.max_attempts)
    assert shown.last_declared_by == "worker-first"
    # jobs are still made by the stored spec
    created = await client.create(job_type="team_notes")
    assert created.job.definition_version == "1"
    timeout_ms = await db.fetchval("SELECT timeout_ms FROM jobs WHERE id = $1", created.job.id)
    assert timeout_ms == TEAM.timeout_s * 1000


async def test_a_schema_that_differs_is_named_too(executor: Any) -> None:
    await declare(executor, "worker-first", spec_of(TEAM))
    other = tpb.JobTypeSpec()
    other.CopyFrom(spec_of(TEAM))
    schema = json.loads(other.output_schema_json)
    schema["properties"]["extra"] = {"type": "string"}
    other.output_schema_json = json.dumps(schema)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await declare(executor, "worker-other", other)

    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert violated_fields(refused.value) == "spec.output_schema_json"


async def test_a_malformed_spec_is_refused_naming_its_fields_and_nothing_is_written(
    executor: Any, database_url: str
) -> None:
    spec = spec_of(TEAM)
    spec.queue = "no-such-queue"
    spec.timeout_seconds = 0
    spec.fairness_key = "input.not_in_the_schema"
    before = await count_rows(database_url)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await declare(executor, "worker-first", spec)

    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reasons(refused.value, DECLARE) == ["INVALID_INPUT"]
    assert violated_fields(refused.value) == "spec.queue,spec.timeout_seconds,spec.fairness_key"
    assert await count_rows(database_url) == before


async def test_a_worker_whose_spec_is_refused_logs_it_and_runs_nothing_of_that_type(
    nats_url: str,
    target: str,
    client: Client,
    db: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # synthetic@1.0.0 is declared (tests/support/stack.py): this worker's is another spec
    mine = dataclasses.replace(synthetic.DEFINITION, timeout_s=synthetic.DEFINITION.timeout_s + 1)
    side = dataclasses.replace(synthetic.DEFINITION, job_type="side_notes", version="1")
    caplog.set_level(logging.INFO, logger="worker_service.declarations")
    async with WorkerApp(
        worker_settings(nats_url, target, worker_id="conflicted"),
        Registry([mine, side]),
    ) as worker:
        assert [d.job_type for d in worker.registry] == ["side_notes"]
        assert worker.worker is not None
        refused = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(refused) == 1
        assert "job type synthetic@1.0.0 refused by the job service" in refused[0].getMessage()
        assert "spec.timeout_seconds" in refused[0].getMessage()

        # its refused type's job was dispatched first, its other type's after: once the
        # other has run, the first was offered to this worker and not taken
        held = await client.create()
        ran = await client.create(job_type="side_notes")
        await eventually(
            lambda: _status(client, ran.job.id, job_pb2.JOB_STATUS_SUCCEEDED),
            timeout=20,
            message="the worker's accepted type did not run",
        )
        job = await client.get(held.job.id)
        assert (job.status, job.attempt_count, job.worker_id) == (job_pb2.JOB_STATUS_QUEUED, 0, "")
    assert await db.fetchval("SELECT count(*) FROM job_events WHERE job_id = $1", held.job.id) == 1
    # the stored spec is the first declarer's
    stored = await _row(db, "synthetic", "1.0.0")
    assert stored["first_declared_by"] == stored["last_declared_by"] == "test-declarer"


async def test_a_type_declared_at_one_replica_is_taken_at_another_at_once(
    database_url: str, nats_url: str
) -> None:
    definition = dataclasses.replace(synthetic.DEFINITION, job_type="fresh_notes", version="7")
    async with (
        JobServiceApp(settings(database_url, nats_url)) as a,
        # B reads new declarations every hour: only its on-miss refresh can find one
        JobServiceApp(settings(database_url, nats_url, job_types_refresh_interval_s=3600)) as b,
        open_channel(f"127.0.0.1:{a.port}", WORKER_TOKEN) as at_a,
        open_channel(f"127.0.0.1:{b.port}") as at_b,
    ):
        to_b = Client(at_b)
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await to_b.create(job_type="fresh_notes")
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND

        stub = executor_service_pb2_grpc.ExecutorServiceStub(at_a)  # type: ignore[no-untyped-call]
        await declare(stub, "worker-at-a", spec_of(definition))
        created = await to_b.create(job_type="fresh_notes", sleep_ms=1)

        assert created.job.definition_version == "7"
        [shown] = await definitions_of(to_b, "fresh_notes")
        assert (shown.version, shown.first_declared_by, shown.current) == (
            "7",
            "worker-at-a",
            True,
        )
        # and bad input is refused at B by the spec declared at A
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await to_b.create(job_type="fresh_notes", sleep_ms=-1)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert violated_fields(refused.value) == "input.sleep_ms"


async def _row(db: asyncpg.Connection, job_type: str, version: str) -> asyncpg.Record:
    row = await db.fetchrow(ROW, job_type, version)
    assert row is not None, f"{job_type}@{version} is not stored"
    return row


async def _status(client: Client, job_id: str, status: int) -> bool:
    return bool((await client.get(job_id)).status == status)
