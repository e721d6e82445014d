"""AdminService.RetryJob of a child job keeps the parent/child contract of seed 001 §3.3,
§3.4 and §6.1: the retry stays the parent's child (listed, reached by the cancel cascade,
its chain visible through retried_from_job_id), and a parent never has two live children
of one type however many times (or however concurrently) an admin retries."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc
import pytest

from shared.errors import JobNotRetryable, LiveChildExists
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.rpc_errors import error_from_rpc
from tests.integration.test_projections import fail_attempt, feynman_succeeded
from tests.support.ai import FEYNMAN_INPUT, worker_result
from tests.support.stack import Client

S = job_pb2

LIVE = ("created", "queued", "running", "retrying", "cancel_requested", "succeeded")


async def retry(client: Client, job_id: str) -> job_pb2.Job:
    return (await client.admin.RetryJob(apb.RetryJobRequest(job_id=job_id))).job


async def live_children(db: asyncpg.Connection, parent_id: str) -> list[str]:
    rows = await db.fetch(
        "SELECT id::text FROM jobs WHERE parent_job_id = $1 AND job_type ="
        " 'review_card_generation' AND status = ANY($2::text[])",
        parent_id,
        list(LIVE),
    )
    return [r["id"] for r in rows]


async def failed_child(client: Client) -> tuple[str, str]:
    parent_id, child_id = await feynman_succeeded(client)
    assert (await fail_attempt(client, child_id, "CREDENTIAL_INVALID")).status == (
        S.JOB_STATUS_FAILED
    )
    return parent_id, child_id


async def test_a_retried_child_stays_its_parents_child(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await failed_child(client)

    new = await retry(client, child_id)

    assert (new.parent_job_id, new.retried_from_job_id) == (parent_id, child_id)
    assert new.trigger == "retry"
    assert new.idempotency_key == ""  # the original keeps review-card:feynman:<parent>
    parent = await client.get(parent_id)
    assert list(parent.child_job_ids) == [child_id, new.id]
    assert await live_children(db, parent_id) == [new.id]
    row = await db.fetchrow("SELECT parent_job_id::text, status FROM jobs WHERE id = $1", new.id)
    assert (row["parent_job_id"], row["status"]) == (parent_id, "queued")


async def test_cancelling_a_parent_cancels_its_retried_child(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await failed_child(client)
    new = await retry(client, child_id)

    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=parent_id, user_id="user-1"))

    assert (await client.get(new.id)).status == S.JOB_STATUS_CANCELLED
    assert await live_children(db, parent_id) == []


async def test_a_child_whose_retry_is_unfinished_cannot_be_retried_again(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await failed_child(client)
    first = await retry(client, child_id)
    jobs_before = await db.fetchval("SELECT count(*) FROM jobs")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await retry(client, child_id)

    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    error = error_from_rpc(raised.value)
    assert isinstance(error, LiveChildExists)
    assert first.id in error.message
    assert await db.fetchval("SELECT count(*) FROM jobs") == jobs_before
    assert await live_children(db, parent_id) == [first.id]


async def test_a_child_can_be_retried_again_once_its_retry_failed(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await failed_child(client)
    first = await retry(client, child_id)
    await fail_attempt(client, first.id, "CREDENTIAL_INVALID")

    second = await retry(client, first.id)

    assert second.retried_from_job_id == first.id
    assert await live_children(db, parent_id) == [second.id]


async def test_a_child_whose_retry_succeeded_cannot_be_retried_into_a_second_card_set(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await failed_child(client)
    first = await retry(client, child_id)
    locked = (await client.lock(first.id)).job
    assert (await client.executor.SubmitResult(await worker_result(locked))).status == (
        S.JOB_STATUS_SUCCEEDED
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await retry(client, child_id)

    assert isinstance(error_from_rpc(raised.value), LiveChildExists)
    assert await live_children(db, parent_id) == [first.id]


async def test_concurrent_retries_of_a_child_make_one_live_child(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await failed_child(client)

    answers = await asyncio.gather(
        *(retry(client, child_id) for _ in range(8)), return_exceptions=True
    )

    made = [a for a in answers if isinstance(a, job_pb2.Job)]
    refused = [a for a in answers if not isinstance(a, job_pb2.Job)]
    assert len(made) == 1
    assert len(refused) == 7
    assert all(isinstance(error_from_rpc(r), LiveChildExists) for r in refused)  # type: ignore[arg-type]
    assert await live_children(db, parent_id) == [made[0].id]


async def test_a_child_of_a_cancelled_parent_cannot_be_retried(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    # a child whose parent was cancelled while it ran: put in place by hand
    child_id = await db.fetchval(
        "INSERT INTO jobs (user_id, job_type, queue, request_hash, parent_job_id, status,"
        " max_attempts, timeout_ms, input_schema_version, output_schema_version,"
        " definition_version) SELECT user_id, 'review_card_generation', 'ai-background',"
        " request_hash, id, 'cancelled', 3, 1000, '1', '1', '1.0.0' FROM jobs WHERE id = $1"
        " RETURNING id::text",
        parent.id,
    )
    await db.execute(
        "INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version)"
        " VALUES ($1, '{}'::jsonb, 'x', '1')",
        child_id,
    )
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=parent.id, user_id="user-1"))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await retry(client, child_id)

    assert isinstance(error_from_rpc(raised.value), JobNotRetryable)
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE parent_job_id = $1", parent.id) == 1
