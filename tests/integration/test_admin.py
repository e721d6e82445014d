"""AdminService: any job with its internal error message (which JobService never shows),
RetryJob from the snapshot, dead letters and their redrive, the registry as data."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import grpc
import pytest

from shared.errors import JobNotFound, JobNotRetryable
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct
from shared.rpc_errors import error_from_rpc
from tests.support.stack import CLIENT_TOKEN, Client, count_rows, open_channel

SECRET_DETAIL = "Traceback: db password hunter2 at /srv/app.py:42"


async def _refused(call: Any) -> tuple[grpc.StatusCode, Any]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value.code(), error_from_rpc(raised.value)


async def _failed_job(client: Client) -> str:
    job = (await client.create(user_id="alice", fail="fatal")).job
    lease = await client.lock(job.id)
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id,
            lease_token=lease.job.lease_token,
            error_code="JOB_REJECTED",
            error_message=SECRET_DETAIL,
        )
    )
    return job.id


async def test_only_admins_see_the_internal_error_message(client: Client, target: str) -> None:
    job_id = await _failed_job(client)

    admin_view = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=job_id))).job
    assert admin_view.status == job_pb2.JOB_STATUS_FAILED
    assert admin_view.internal_error_message == SECRET_DETAIL
    assert admin_view.error_code == "JOB_REJECTED"
    assert [e.to_status for e in admin_view.events][-1] == job_pb2.JOB_STATUS_FAILED

    async with open_channel(target, CLIENT_TOKEN) as channel:
        owner = Client(channel)
        views = [
            await owner.get(job_id, user_id="alice"),
            (await owner.jobs.ListJobs(jpb.ListJobsRequest(user_id="alice"))).jobs[0],
        ]
        async for update in owner.jobs.WatchJob(
            jpb.WatchJobRequest(job_id=job_id, user_id="alice")
        ):
            views.append(update.job)
    for view in views:
        assert view.internal_error_message == ""
        assert "hunter2" not in view.SerializeToString().decode(errors="replace")
        assert view.error_message  # the public one
    # and the admin listing carries it too
    listed = await client.admin.ListJobs(apb.AdminListJobsRequest(user_id="alice"))
    assert listed.jobs[0].internal_error_message == SECRET_DETAIL


async def test_admin_get_of_an_unknown_job_is_not_found(client: Client) -> None:
    code, error = await _refused(
        client.admin.GetJob(apb.AdminGetJobRequest(job_id="00000000-0000-4000-8000-000000000000"))
    )
    assert code is grpc.StatusCode.NOT_FOUND
    assert isinstance(error, JobNotFound)


async def test_retry_makes_a_new_job_from_the_snapshot(
    client: Client, db: asyncpg.Connection
) -> None:
    old_id = await _failed_job(client)

    new = (await client.admin.RetryJob(apb.RetryJobRequest(job_id=old_id))).job

    assert new.id != old_id
    assert new.retried_from_job_id == old_id
    assert new.trigger == "retry"
    assert new.status == job_pb2.JOB_STATUS_QUEUED
    assert new.user_id == "alice"
    assert new.attempt_count == 0
    snapshots = await db.fetch(
        "SELECT job_id::text, payload, content_hash FROM job_snapshots ORDER BY created_at"
    )
    by_job = {r["job_id"]: (r["payload"], r["content_hash"]) for r in snapshots}
    assert by_job[new.id] == by_job[old_id]
    dispatch = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE event_type = 'job.dispatch'"
        " AND aggregate_id = $1",
        new.id,
    )
    assert dispatch == 1
    # the old job is untouched, and the new one is a job like any other
    assert (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=old_id))).job.status == (
        job_pb2.JOB_STATUS_FAILED
    )
    lease = await client.lock(new.id)
    assert lease.outcome == epb.LOCK_OUTCOME_LOCKED
    assert dict_from_struct(lease.job.input)["fail"] == "fatal"


async def test_retry_of_a_job_that_is_not_failed_or_cancelled_is_refused(
    client: Client, database_url: str
) -> None:
    queued = (await client.create()).job
    running = (await client.create()).job
    await client.lock(running.id)
    before = await count_rows(database_url)
    for job_id in (queued.id, running.id):
        code, error = await _refused(client.admin.RetryJob(apb.RetryJobRequest(job_id=job_id)))
        assert code is grpc.StatusCode.FAILED_PRECONDITION
        assert isinstance(error, JobNotRetryable)
    assert await count_rows(database_url) == before


async def test_a_cancelled_job_can_be_retried(client: Client) -> None:
    job = (await client.create(user_id="bob")).job
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="bob"))
    new = (await client.admin.RetryJob(apb.RetryJobRequest(job_id=job.id))).job
    assert new.retried_from_job_id == job.id


async def test_dead_letters_list_failed_jobs_and_dead_events_and_redrive(
    client: Client, db: asyncpg.Connection
) -> None:
    failed_ids = [await _failed_job(client) for _ in range(3)]
    await client.create()  # a live job: not a dead letter
    dead_ids = await db.fetch(
        "UPDATE outbox_events SET status = 'dead', attempt_count = 10, last_error = 'boom'"
        " WHERE event_type = 'job.dispatch' AND aggregate_id = ANY($1::text[]) RETURNING id",
        failed_ids[:2],
    )
    dead = sorted((r["id"] for r in dead_ids), reverse=True)

    failed_seen, events_seen, token = [], [], ""
    while True:
        page = await client.admin.ListDeadLetters(
            apb.ListDeadLettersRequest(page_size=2, page_token=token)
        )
        failed_seen += [(j.id, j.error_code, j.internal_error_message) for j in page.failed_jobs]
        events_seen += [(e.id, e.job_id, e.attempts, e.last_error) for e in page.dead_events]
        token = page.next_page_token
        if not token:
            break
    assert sorted(i for i, _, _ in failed_seen) == sorted(failed_ids)
    assert {(c, m) for _, c, m in failed_seen} == {("JOB_REJECTED", SECRET_DETAIL)}
    assert [e[0] for e in events_seen] == dead
    assert all(e[2] == 10 and e[3] == "boom" for e in events_seen)

    one = await client.admin.RedriveDeadLetters(apb.RedriveDeadLettersRequest(event_ids=[dead[0]]))
    assert one.redriven == 1
    rest = await client.admin.RedriveDeadLetters(apb.RedriveDeadLettersRequest())
    assert rest.redriven == 1
    statuses = await db.fetch("SELECT status FROM outbox_events WHERE id = ANY($1)", dead)
    assert {r["status"] for r in statuses} <= {"pending", "processing", "published"}
    empty = await client.admin.ListDeadLetters(apb.ListDeadLettersRequest())
    assert list(empty.dead_events) == []


async def test_job_definitions_as_data(client: Client) -> None:
    answer = await client.admin.ListJobDefinitions(apb.ListJobDefinitionsRequest())
    by_type = {d.job_type: d for d in answer.definitions}
    assert sorted(by_type) == [
        "approval_agent",
        "feynman_evaluation",
        "knowledge_base_review",
        "review_card_generation",
        "study_plan",
        "synthetic",
    ]
    assert by_type["review_card_generation"].queue == "ai-background"
    synthetic = by_type["synthetic"]
    assert synthetic.queue == "ai-interactive"
    assert synthetic.max_attempts >= 1
    schema = json.loads(synthetic.input_schema_json)
    assert "sleep_ms" in schema["properties"]
    assert json.loads(synthetic.output_schema_json)["type"] == "object"
