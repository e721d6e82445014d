"""What an operator reads of a job and the fleet (issue 31): the job's input, its retries
both ways, the attempt its error belongs to, the worker of each attempt, a job found by
the end of its id, and the workers connected now."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import grpc

from job_service.adapters.postgres.vocabulary.filters import filter_conditions
from job_service.domain.selection import JobFilter
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.stack import Client


async def _admin_get(client: Client, job_id: str) -> job_pb2.Job:
    return (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=job_id))).job


async def _fail(client: Client, job_id: str, code: str, worker_id: str = "worker-a") -> None:
    lease = await client.lock(job_id, worker_id)
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(job_id=job_id, lease_token=lease.job.lease_token, error_code=code)
    )


async def test_the_owner_and_an_admin_read_the_input_and_a_listing_leaves_it_out(
    client: Client,
) -> None:
    job = (await client.create(user_id="reader", sleep_ms=800, fail_times=3)).job

    owned = await client.get(job.id, "reader")
    assert owned.input_state == job_pb2.INPUT_STATE_SHOWN
    assert {k: v for k, v in owned.input.items()} == {
        "sleep_ms": 800,
        "fail": "none",
        "fail_times": 3,
        "output_bytes": 16,
        "wait_signals": [],  # the declared defaults, as the worker's model fills them
        "signal_timeout_ms": 20_000,
    }
    assert 0 < owned.input_bytes < 200
    assert list(owned.input_withheld_fields) == []
    admin = await _admin_get(client, job.id)
    assert admin.input == owned.input
    assert admin.input_state == job_pb2.INPUT_STATE_SHOWN

    [listed] = (await client.jobs.ListJobs(jpb.ListJobsRequest(user_id="reader"))).jobs
    assert listed.input_state == job_pb2.INPUT_STATE_UNSPECIFIED
    assert not listed.HasField("input")


async def test_an_input_too_large_to_show_gives_its_size_and_a_removed_one_says_so(
    client: Client, db: asyncpg.Connection
) -> None:
    large = (await client.create(user_id="reader-2")).job
    removed = (await client.create(user_id="reader-2")).job
    # what a type with a large input would have stored, and what the snapshot cleaner does
    big = {"text": "x" * (70 * 1024)}
    await db.execute(
        "UPDATE job_snapshots SET payload = $2::jsonb WHERE job_id = $1", large.id, json.dumps(big)
    )
    await db.execute("DELETE FROM job_snapshots WHERE job_id = $1", removed.id)

    shown = await client.get(large.id, "reader-2")
    assert shown.input_state == job_pb2.INPUT_STATE_TOO_LARGE
    assert not shown.HasField("input")
    assert shown.input_bytes > 70 * 1024
    gone = await _admin_get(client, removed.id)
    assert gone.input_state == job_pb2.INPUT_STATE_REMOVED
    assert (gone.input_bytes, gone.HasField("input")) == (0, False)


async def test_a_retried_job_names_its_retries_and_each_retry_its_source(
    client: Client,
) -> None:
    original = (await client.create(user_id="retrier", fail="fatal")).job
    await _fail(client, original.id, "JOB_REJECTED")
    first = (await client.admin.RetryJob(apb.RetryJobRequest(job_id=original.id))).job
    await _fail(client, first.id, "JOB_REJECTED")
    second = (await client.admin.RetryJob(apb.RetryJobRequest(job_id=first.id))).job

    assert list((await client.get(original.id, "retrier")).retried_as_job_ids) == [first.id]
    read_first = await _admin_get(client, first.id)
    assert list(read_first.retried_as_job_ids) == [second.id]
    assert read_first.retried_from_job_id == original.id
    read_second = await client.get(second.id, "retrier")
    assert (list(read_second.retried_as_job_ids), read_second.retried_from_job_id) == (
        [],
        first.id,
    )


async def test_a_running_attempt_labels_the_error_of_the_attempt_before_it_and_names_workers(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(user_id="labeller", fail="retryable", fail_times=1)).job
    await _fail(client, job.id, "PROVIDER_TIMEOUT", worker_id="worker-a")
    retrying = await client.get(job.id, "labeller")
    assert retrying.status == job_pb2.JOB_STATUS_RETRYING
    assert (retrying.error_code, retrying.error_attempt) == ("PROVIDER_TIMEOUT", 1)
    [listed] = (await client.jobs.ListJobs(jpb.ListJobsRequest(user_id="labeller"))).jobs
    assert listed.error_attempt == 1  # a list row labels it too

    await db.execute("UPDATE jobs SET next_run_at = now() WHERE id = $1", job.id)  # due now
    await client.lock(job.id, "worker-b")
    running = await client.get(job.id, "labeller")
    assert running.status == job_pb2.JOB_STATUS_RUNNING
    assert (running.attempt_count, running.error_code, running.error_attempt) == (
        2,
        "PROVIDER_TIMEOUT",
        1,
    )
    assert running.worker_id == "worker-b"
    started = [
        (e.attempt, e.worker_id)
        for e in running.events
        if e.to_status == job_pb2.JOB_STATUS_RUNNING
    ]
    assert started == [(1, "worker-a"), (2, "worker-b")]
    assert all(not e.worker_id for e in running.events if e.to_status == job_pb2.JOB_STATUS_QUEUED)


async def test_a_job_is_found_by_the_end_of_its_id_and_only_by_its_owner(
    client: Client,
) -> None:
    made = await client.jobs.CreateJobs(
        jpb.CreateJobsRequest(
            requests=[
                jpb.CreateJobRequest(
                    user_id="finder", job_type="synthetic", input=struct_from_dict({})
                )
                for _ in range(40)
            ]
        )
    )
    ids = [r.response.job.id for r in made.results]
    assert len({i[-8:] for i in ids}) == 40
    for job_id in ids:
        for suffix in (job_id[-8:], job_id[-8:].upper(), job_id.replace("-", "")[-14:]):
            page = await client.jobs.ListJobs(
                jpb.ListJobsRequest(user_id="finder", id_suffix=suffix, page_size=2)
            )
            assert [j.id for j in page.jobs] == [job_id]
    other = await client.jobs.ListJobs(
        jpb.ListJobsRequest(user_id="someone-else", id_suffix=ids[0][-8:])
    )
    assert list(other.jobs) == []
    anyone = await client.admin.ListJobs(apb.AdminListJobsRequest(id_suffix=ids[0][-8:]))
    assert [j.id for j in anyone.jobs] == [ids[0]]


async def test_the_workers_connected_now_are_listed_by_id_with_their_leases(
    client: Client,
) -> None:
    job = (await client.create(user_id="fleet")).job
    await client.lock(job.id, "worker-listed")
    leaving = asyncio.Event()

    async def messages() -> AsyncIterator[epb.WorkerSessionRequest]:
        yield epb.WorkerSessionRequest(worker_id="worker-listed", incarnation="p1")
        await leaving.wait()
        yield epb.WorkerSessionRequest(goodbye=True)

    session = client.executor.WorkerSession(messages())
    try:
        first = await session.read()
        assert first.session_id
        workers = (await client.admin.ListWorkers(apb.ListWorkersRequest())).workers
        [listed] = [w for w in workers if w.worker_id == "worker-listed"]
        assert listed.running_jobs == 1
        assert listed.connected_at.seconds > 0
    finally:
        leaving.set()
        assert (await session.read()).closed  # the goodbye's answer
        assert await session.read() is grpc.aio.EOF
    workers = (await client.admin.ListWorkers(apb.ListWorkersRequest())).workers
    assert "worker-listed" not in [w.worker_id for w in workers]


async def test_the_end_of_an_id_is_looked_up_through_its_index(db: asyncpg.Connection) -> None:
    args: list[object] = []
    [condition] = filter_conditions(JobFilter(id_suffix="0123abcd"), args)
    await db.execute("SET enable_seqscan = off")  # a tiny table: only a usable index wins
    plan = await db.fetchval(
        f"EXPLAIN (FORMAT JSON) SELECT j.id FROM jobs j WHERE {condition}", *args
    )
    assert "jobs_id_tail" in json.dumps(plan)
