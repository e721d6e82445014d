"""AdminService.CancelJobs / RetryJobs (issue 13): a selection by filter or ids, bounded
pages oldest first with a continuation, dry runs that write nothing, CancelJob's and
RetryJob's semantics per job, and the calling principal on every job's timeline."""

from __future__ import annotations

import asyncio
import json
import logging

import asyncpg
import grpc
import pytest
from google.rpc import code_pb2
from nats.aio.client import Client as NatsClient

from shared.constants import CANCEL_SUBJECT
from shared.errors import JobNotFound, JobNotRetryable
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.rpc_errors import error_from_status
from tests.support.stack import Client, count_rows, result_request

PRINCIPAL = "test-all"  # the shared helpers' token (tests/support/stack.py)
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


async def _statuses(db: asyncpg.Connection, ids: list[str]) -> dict[str, str]:
    rows = await db.fetch("SELECT id::text, status FROM jobs WHERE id = ANY($1::uuid[])", ids)
    return {r["id"]: r["status"] for r in rows}


async def _reasons(db: asyncpg.Connection, job_id: str) -> list[str | None]:
    return [
        r["reason"]
        for r in await db.fetch(
            "SELECT reason FROM job_events WHERE job_id = $1 ORDER BY id", job_id
        )
    ]


async def _failed(client: Client, user_id: str) -> str:
    job = (await client.create(user_id=user_id, fail="fatal")).job
    lease = await client.lock(job.id)
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id, lease_token=lease.job.lease_token, error_code="JOB_REJECTED"
        )
    )
    return job.id


async def _succeeded(client: Client, user_id: str) -> str:
    job = (await client.create(user_id=user_id)).job
    lease = (await client.lock(job.id)).job
    await client.executor.SubmitResult(
        result_request(job.id, lease.lease_token, {"attempt": 1, "data": "x"})
    )
    return job.id


async def test_a_filter_cancel_goes_through_the_jobs_oldest_first_in_bounded_calls(
    client: Client, db: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    ids = [(await client.create(user_id="bulk-a")).job.id for _ in range(7)]
    others = [
        (await client.create(user_id="bulk-b")).job.id,  # another user's
        await _succeeded(client, "bulk-a"),  # finished: not matched
    ]
    selection = apb.JobSelection(user_id="bulk-a")
    caplog.set_level(logging.INFO, logger="job_service.usecases.bulk")

    answers, token = [], ""
    for _ in range(3):
        answer = await client.admin.CancelJobs(
            apb.CancelJobsRequest(
                selection=selection, limit=3, page_token=token, reason="provider outage"
            )
        )
        answers.append(answer)
        token = answer.next_page_token

    assert [a.cancelled for a in answers] == [3, 3, 1]
    assert [list(a.job_ids) for a in answers] == [ids[0:3], ids[3:6], ids[6:7]]
    assert [bool(a.next_page_token) for a in answers] == [True, True, False]
    assert set((await _statuses(db, ids)).values()) == {"cancelled"}
    assert (await _statuses(db, others))[others[0]] == "queued"
    # each job's timeline names the principal and the reason
    assert (await _reasons(db, ids[4]))[-1] == f"admin {PRINCIPAL}: provider outage"
    assert f"CancelJobs by {PRINCIPAL}" in caplog.text
    # the cancel went out as CancelJob's does: a domain event per cancelled job
    events = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE event_type = 'job.cancelled'"
        " AND aggregate_id = ANY($1::text[])",
        ids,
    )
    assert events == 7


async def test_a_page_token_only_continues_the_selection_it_came_from(client: Client) -> None:
    for _ in range(2):
        await client.create(user_id="bulk-t")
    first = await client.admin.CancelJobs(
        apb.CancelJobsRequest(selection=apb.JobSelection(user_id="bulk-t"), limit=1)
    )
    assert first.next_page_token
    for request in (
        apb.CancelJobsRequest(
            selection=apb.JobSelection(user_id="bulk-u"), page_token=first.next_page_token
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client.admin.CancelJobs(request)
        assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    # nor does a cancel's token continue a retry
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.admin.RetryJobs(
            apb.RetryJobsRequest(
                selection=apb.JobSelection(user_id="bulk-t"), page_token=first.next_page_token
            )
        )
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_a_dry_run_counts_and_writes_nothing(
    client: Client, db: asyncpg.Connection, database_url: str
) -> None:
    ids = [(await client.create(user_id="bulk-d")).job.id for _ in range(5)]
    failed = [await _failed(client, "bulk-d") for _ in range(2)]
    before = await count_rows(database_url)

    cancel = await client.admin.CancelJobs(
        apb.CancelJobsRequest(selection=apb.JobSelection(user_id="bulk-d"), dry_run=True, limit=2)
    )
    retry = await client.admin.RetryJobs(
        apb.RetryJobsRequest(
            selection=apb.JobSelection(user_id="bulk-d", status=job_pb2.JOB_STATUS_FAILED),
            dry_run=True,
        )
    )

    assert (cancel.matched, cancel.cancelled, list(cancel.job_ids)) == (5, 2, ids[:2])
    assert cancel.next_page_token == ""
    assert (retry.matched, retry.retried) == (2, 2)
    assert [o.job_id for o in retry.outcomes] == failed
    assert all(o.new_job_id == "" for o in retry.outcomes)
    assert await count_rows(database_url) == before
    assert set((await _statuses(db, ids)).values()) == {"queued"}


async def test_a_running_job_is_told_to_stop_at_once_and_finished_ones_are_skipped(
    client: Client, nats_client: NatsClient, db: asyncpg.Connection
) -> None:
    notices: asyncio.Queue[bytes] = asyncio.Queue()

    async def on_notice(msg) -> None:  # type: ignore[no-untyped-def]
        await notices.put(msg.data)

    await nats_client.subscribe(CANCEL_SUBJECT, cb=on_notice)
    await nats_client.flush()
    running = (await client.create(user_id="bulk-r")).job
    lease = (await client.lock(running.id)).job
    finished = await _succeeded(client, "bulk-r")

    answer = await client.admin.CancelJobs(
        apb.CancelJobsRequest(
            selection=apb.JobSelection(job_ids=[running.id, finished, UNKNOWN_ID]),
            reason="bad deploy",
        )
    )

    assert (answer.cancelled, answer.skipped, list(answer.job_ids)) == (1, 1, [running.id])
    assert json.loads(await asyncio.wait_for(notices.get(), 5)) == {"job_id": running.id}
    beat = await client.executor.Heartbeat(
        epb.HeartbeatRequest(job_id=running.id, lease_token=lease.lease_token, progress=-1)
    )
    assert beat.cancel_requested
    assert await _statuses(db, [running.id, finished]) == {
        running.id: "cancel_requested",
        finished: "succeeded",
    }
    assert (await _reasons(db, running.id))[-1] == f"admin {PRINCIPAL}: bad deploy"


async def test_retry_answers_each_refused_job_alone_and_retries_the_rest(
    client: Client, db: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    failed = [await _failed(client, "bulk-f") for _ in range(2)]
    queued = (await client.create(user_id="bulk-f")).job.id
    caplog.set_level(logging.INFO, logger="job_service.usecases.bulk")

    answer = await client.admin.RetryJobs(
        apb.RetryJobsRequest(
            selection=apb.JobSelection(job_ids=[*failed, queued, UNKNOWN_ID]),
            reason="provider fixed",
        )
    )

    assert answer.retried == 2
    by_job = {o.job_id: o for o in answer.outcomes}
    assert set(by_job) == {*failed, queued, UNKNOWN_ID}
    refused = error_from_status(by_job[queued].status)
    assert by_job[queued].status.code == code_pb2.FAILED_PRECONDITION
    assert isinstance(refused, JobNotRetryable)
    assert refused.metadata["job_id"] == queued
    assert isinstance(error_from_status(by_job[UNKNOWN_ID].status), JobNotFound)
    for old in failed:
        new = by_job[old].new_job_id
        assert by_job[old].status.code == code_pb2.OK
        row = await db.fetchrow(
            "SELECT status, retried_from_job_id::text AS source FROM jobs WHERE id = $1", new
        )
        assert (row["status"], row["source"]) == ("queued", old)
        # the new job's timeline starts with who retried it and why
        assert await _reasons(db, new) == [f"admin {PRINCIPAL}: provider fixed"]
    assert (await _statuses(db, [queued]))[queued] == "queued"
    assert f"RetryJobs by {PRINCIPAL}" in caplog.text


async def test_retry_by_filter_continues_over_pages(client: Client, db: asyncpg.Connection) -> None:
    failed = [await _failed(client, "bulk-g") for _ in range(3)]
    await client.create(user_id="bulk-g")  # queued: not matched by a retry's filter
    selection = apb.JobSelection(user_id="bulk-g", job_type="synthetic")

    first = await client.admin.RetryJobs(apb.RetryJobsRequest(selection=selection, limit=2))
    second = await client.admin.RetryJobs(
        apb.RetryJobsRequest(selection=selection, limit=2, page_token=first.next_page_token)
    )

    assert [o.job_id for o in first.outcomes] == failed[:2]
    assert [o.job_id for o in second.outcomes] == failed[2:]
    assert (first.retried, second.retried, second.next_page_token) == (2, 1, "")
    retries = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE retried_from_job_id = ANY($1::uuid[])", failed
    )
    assert retries == 3


async def test_cancel_takes_unfinished_descendants_with_each_job_as_cancel_job_does(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = await _succeeded(client, "bulk-p")  # finished: skipped, its children are not
    waiting = (await client.create(user_id="bulk-p")).job.id
    running = (await client.create(user_id="bulk-p")).job.id
    await client.lock(running)
    grandchild = (await client.create(user_id="bulk-p")).job.id
    await db.execute(
        "UPDATE jobs SET parent_job_id = $1 WHERE id = ANY($2::uuid[])", parent, [waiting, running]
    )
    await db.execute("UPDATE jobs SET parent_job_id = $1 WHERE id = $2", running, grandchild)

    answer = await client.admin.CancelJobs(
        apb.CancelJobsRequest(selection=apb.JobSelection(job_ids=[parent]), reason="tree")
    )

    assert (answer.cancelled, answer.skipped) == (0, 1)
    assert await _statuses(db, [parent, waiting, running, grandchild]) == {
        parent: "succeeded",
        waiting: "cancelled",
        running: "cancel_requested",
        grandchild: "cancelled",
    }
    assert (await _reasons(db, waiting))[-1] == "parent_cancelled"


async def test_a_single_retry_names_its_principal_on_the_new_job_too(
    client: Client, db: asyncpg.Connection
) -> None:
    old = await _failed(client, "bulk-s")
    new = (await client.admin.RetryJob(apb.RetryJobRequest(job_id=old))).job
    assert await _reasons(db, new.id) == [f"admin {PRINCIPAL}"]


async def test_two_bulk_cancels_of_one_selection_at_once_cancel_each_job_once(
    client: Client, db: asyncpg.Connection
) -> None:
    ids = [(await client.create(user_id="bulk-c")).job.id for _ in range(12)]
    request = apb.CancelJobsRequest(selection=apb.JobSelection(user_id="bulk-c"), limit=12)

    first, second = await asyncio.gather(
        client.admin.CancelJobs(request), client.admin.CancelJobs(request)
    )

    assert sorted([*first.job_ids, *second.job_ids]) == sorted(ids)
    events = await db.fetch(
        "SELECT job_id::text AS id, count(*) AS n FROM job_events"
        " WHERE job_id = ANY($1::uuid[]) AND to_status = 'cancelled' GROUP BY job_id",
        ids,
    )
    assert {r["id"]: r["n"] for r in events} == dict.fromkeys(ids, 1)


async def test_a_cancel_walk_leaves_jobs_created_after_its_first_call(
    client: Client, db: asyncpg.Connection
) -> None:
    """A walk acts on the jobs that matched at its first call (issue 25): a job created
    while it goes on is not part of it."""
    before = [(await client.create(user_id="bulk-snap")).job.id for _ in range(2)]
    selection = apb.JobSelection(user_id="bulk-snap")
    first = await client.admin.CancelJobs(apb.CancelJobsRequest(selection=selection, limit=1))
    during = (await client.create(user_id="bulk-snap")).job.id

    token, cancelled = first.next_page_token, list(first.job_ids)
    while token:
        page = await client.admin.CancelJobs(
            apb.CancelJobsRequest(selection=selection, limit=1, page_token=token)
        )
        cancelled += page.job_ids
        token = page.next_page_token

    assert cancelled == before
    assert (await _statuses(db, [during]))[during] == "queued"
