"""Issue 14's data lifecycle against real PostgreSQL and NATS: redacted output fields
(seed 000 §2.1 outputRedaction, §8.4), targets and the model a job ran with (seed 003 §2),
and pinned prompt / output schema versions (seed 000 §2.4)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest

from shared.canonical import content_hash
from shared.errors import InvalidInput
from shared.output_hash import output_hash
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import Registry, default_registry
from shared.rpc_errors import error_from_rpc
from tests.support.ai import FEYNMAN_INPUT, worker_result
from tests.support.stack import (
    Client,
    count_rows,
    open_channel,
    result_request,
    running_job_service,
)
from tests.support.wait import eventually

SECRET = "SECRET-model-reasoning-0xC0FFEE"


def redacting_registry() -> Registry:
    """The shipped job types, with synthetic's `data` output field redacted (rules v2)."""
    return Registry(
        dataclasses.replace(d, output_redaction=frozenset({"data"}), redaction_version="2")
        if d.job_type == "synthetic"
        else d
        for d in default_registry()
    )


@pytest.fixture
async def redacting(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    async with (
        running_job_service(database_url, nats_url, redacting_registry()) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Client(channel)


# --- item 4: output redaction --------------------------------------------------------


async def test_redacted_output_fields_are_never_stored_nor_shown_to_the_owner(
    redacting: Client, db: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    job = (await redacting.create(sleep_ms=1)).job
    locked = (await redacting.lock(job.id)).job
    output = {"attempt": 1, "data": SECRET}

    answer = await redacting.executor.SubmitResult(
        result_request(job.id, locked.lease_token, output)
    )

    assert answer.status == job_pb2.JOB_STATUS_SUCCEEDED
    row = await db.fetchrow(
        "SELECT validated_output::text AS out, output_hash FROM jobs WHERE id = $1", job.id
    )
    stored = json.loads(row["out"])
    assert stored == {"attempt": 1, "data": f"sha256:{content_hash(SECRET)}"}
    assert row["output_hash"] == output_hash(output)  # the hash of what the worker made
    whole_db = await db.fetchval(
        "SELECT string_agg(t::text, '') FROM (SELECT j::text FROM jobs j UNION ALL"
        " SELECT e::text FROM job_events e UNION ALL SELECT o::text FROM outbox_events o) t"
    )
    assert SECRET not in whole_db
    seen = await redacting.get(job.id)
    assert dict_from_struct(seen.output) == stored
    listed = await redacting.jobs.ListJobs(jpb.ListJobsRequest(user_id="user-1"))
    assert SECRET not in str(listed)
    admin = await redacting.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))
    assert SECRET not in str(admin)
    assert SECRET not in caplog.text


async def test_a_dependents_worker_reads_a_redacted_field_redacted(
    redacting: Client, db: asyncpg.Connection
) -> None:
    """FetchDependencyResults hands the worker of a join its dependencies' outputs as
    stored: a redacted field is its hash there too (issue 30, results passed on)."""
    job = (await redacting.create(sleep_ms=1)).job
    locked = (await redacting.lock(job.id)).job
    await redacting.executor.SubmitResult(
        result_request(job.id, locked.lease_token, {"attempt": 1, "data": SECRET})
    )
    join = (
        await redacting.jobs.CreateJob(
            jpb.CreateJobRequest(
                user_id="user-1",
                job_type="synthetic",
                input=struct_from_dict({"sleep_ms": 1}),
                depends_on=[job.id],
            )
        )
    ).job
    due = "SELECT next_run_at <= now() FROM jobs WHERE id = $1"
    await eventually(lambda: db.fetchval(due, join.id), message="the join becomes due")
    lease = (await redacting.lock(join.id)).job.lease_token

    page = await redacting.executor.FetchDependencyResults(
        epb.FetchDependencyResultsRequest(job_id=join.id, lease_token=lease)
    )

    [result] = page.results
    assert dict_from_struct(result.output) == {
        "attempt": 1,
        "data": f"sha256:{content_hash(SECRET)}",
    }
    assert SECRET not in str(page)


async def test_snapshots_record_the_redaction_version_they_were_built_under(
    redacting: Client, db: asyncpg.Connection
) -> None:
    job = (await redacting.create(sleep_ms=1)).job

    version = await db.fetchval(
        "SELECT redaction_version FROM job_snapshots WHERE job_id = $1", job.id
    )

    assert version == "2"


async def test_list_job_definitions_shows_redaction_and_content_safety(
    redacting: Client,
) -> None:
    answer = await redacting.admin.ListJobDefinitions(apb.ListJobDefinitionsRequest())
    by_type = {d.job_type: d for d in answer.definitions}

    synthetic, feynman = by_type["synthetic"], by_type["feynman_evaluation"]
    assert (list(synthetic.output_redaction), synthetic.redaction_version) == (["data"], "2")
    assert not synthetic.content_safety_check
    assert (list(feynman.output_redaction), feynman.redaction_version) == ([], "1")
    assert feynman.content_safety_check
    assert feynman.retention_seconds == 90 * 24 * 3600.0  # JOBS_JOB_RETENTION_S


# --- item 5: targets, and the model a job ran with ------------------------------------


async def _create_about(client: Client, user: str, target_id: str) -> str:
    request = jpb.CreateJobRequest(
        user_id=user,
        job_type="synthetic",
        input=struct_from_dict({"sleep_ms": 1}),
        target_type="knowledge_item",
        target_id=target_id,
    )
    return (await client.jobs.CreateJob(request)).job.id


async def test_a_target_is_stored_returned_and_filters_both_listings(
    client: Client, db: asyncpg.Connection
) -> None:
    about_42 = [await _create_about(client, "alice", "ki-42") for _ in range(3)]
    await _create_about(client, "alice", "ki-43")
    await _create_about(client, "bob", "ki-42")
    await client.create(user_id="alice", sleep_ms=1)  # about nothing

    row = await db.fetchrow("SELECT target_type, target_id FROM jobs WHERE id = $1", about_42[0])
    assert tuple(row) == ("knowledge_item", "ki-42")
    assert (await client.get(about_42[0], "alice")).target_id == "ki-42"
    mine = await client.jobs.ListJobs(
        jpb.ListJobsRequest(user_id="alice", target_type="knowledge_item", target_id="ki-42")
    )
    assert [j.id for j in mine.jobs] == list(reversed(about_42))
    typed = await client.jobs.ListJobs(
        jpb.ListJobsRequest(user_id="alice", target_type="knowledge_item")
    )
    assert len(typed.jobs) == 4
    everyone = await client.admin.ListJobs(
        apb.AdminListJobsRequest(target_type="knowledge_item", target_id="ki-42")
    )
    assert sorted(j.user_id for j in everyone.jobs) == ["alice", "alice", "alice", "bob"]


async def test_a_page_token_of_one_target_does_not_serve_another(client: Client) -> None:
    for _ in range(3):
        await _create_about(client, "alice", "ki-42")
    first = await client.jobs.ListJobs(
        jpb.ListJobsRequest(
            user_id="alice", target_type="knowledge_item", target_id="ki-42", page_size=1
        )
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.jobs.ListJobs(
            jpb.ListJobsRequest(
                user_id="alice",
                target_type="knowledge_item",
                target_id="ki-43",
                page_token=first.next_page_token,
            )
        )

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error_from_rpc(raised.value).violations] == ["page_token"]


async def test_the_feynman_flow_targets_its_knowledge_item_and_records_the_model(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    assert (parent.target_type, parent.target_id) == ("knowledge_item", "ki-42")
    locked = (await client.lock(parent.id)).job

    await client.executor.SubmitResult(await worker_result(locked))

    row = await db.fetchrow("SELECT model_provider, model_name FROM jobs WHERE id = $1", parent.id)
    assert tuple(row) == ("fake", "fake-primary")  # tests.support.ai.USAGE
    seen = await client.get(parent.id)
    assert (seen.model_provider, seen.model_name) == ("fake", "fake-primary")
    # the child (review cards) is stored too, through NEW_JOB_COLUMNS
    assert len(seen.child_job_ids) == 1
    listed = await client.jobs.ListJobs(
        jpb.ListJobsRequest(user_id="user-1", target_type="knowledge_item", target_id="ki-42")
    )
    assert [j.id for j in listed.jobs] == [parent.id]


# --- item 6: pinned versions ----------------------------------------------------------


async def test_a_job_may_pin_a_registered_prompt_and_output_schema_version(
    client: Client, db: asyncpg.Connection
) -> None:
    request = jpb.CreateJobRequest(
        user_id="user-1",
        job_type="feynman_evaluation",
        input=struct_from_dict(FEYNMAN_INPUT),
        prompt_version="1.0.0",
        output_schema_version="1",
    )
    job = (await client.jobs.CreateJob(request)).job

    row = await db.fetchrow(
        "SELECT prompt_version, output_schema_version FROM jobs WHERE id = $1", job.id
    )
    assert tuple(row) == ("1.0.0", "1")
    assert (job.prompt_version, job.output_schema_version) == ("1.0.0", "1")


async def test_a_pinned_version_is_part_of_the_idempotent_request(client: Client) -> None:
    base = {
        "user_id": "user-1",
        "job_type": "feynman_evaluation",
        "input": struct_from_dict(FEYNMAN_INPUT),
        "idempotency_key": "k1",
    }
    await client.jobs.CreateJob(jpb.CreateJobRequest(**base))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.jobs.CreateJob(jpb.CreateJobRequest(**base, output_schema_version="1"))

    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert not isinstance(error_from_rpc(raised.value), InvalidInput)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"target_type": "Knowledge Item", "target_id": "x"}, "target_type"),
        ({"target_id": "ki-1"}, "target_type"),
        ({"target_type": "knowledge_item"}, "target_id"),
        ({"target_type": "knowledge_item", "target_id": "k" * 256}, "target_id"),
        ({"job_type": "feynman_evaluation", "prompt_version": "9.9.9"}, "prompt_version"),
        ({"prompt_version": "1.0.0"}, "prompt_version"),  # synthetic has no prompt
        ({"output_schema_version": "2"}, "output_schema_version"),
    ],
)
async def test_a_bad_target_or_version_is_refused_naming_the_field_and_writes_nothing(
    client: Client, database_url: str, fields: dict, field: str
) -> None:
    job_type = fields.pop("job_type", "synthetic")
    job_input = FEYNMAN_INPUT if job_type == "feynman_evaluation" else {"sleep_ms": 1}
    before = await count_rows(database_url)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.jobs.CreateJob(
            jpb.CreateJobRequest(
                user_id="user-1", job_type=job_type, input=struct_from_dict(job_input), **fields
            )
        )

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in [v.field for v in error_from_rpc(raised.value).violations]
    assert await count_rows(database_url) == before
