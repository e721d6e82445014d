"""Retries where retry features meet (issue 25, item 3): a RetryJobs walk is pinned to the
jobs that matched at its first call, an original job has at most one live retry whoever
asks (RetryJob, RetryJobs, both at once), and RetryJob is idempotent with a key."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc
import pytest

from shared.errors import IdempotencyKeyReused, LiveRetryExists
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.rpc_errors import error_from_rpc, error_from_status
from tests.support.stack import Client


async def _fail(client: Client, job_id: str) -> None:
    """Ends the job's next attempt with a final failure (a job that fails fast)."""
    lease = await client.lock(job_id)
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job_id, lease_token=lease.job.lease_token, error_code="JOB_REJECTED"
        )
    )


async def _failed(client: Client, user_id: str) -> str:
    job = (await client.create(user_id=user_id, fail="fatal")).job
    await _fail(client, job.id)
    return job.id


async def _retry(client: Client, job_id: str, key: str = "") -> str:
    answer = await client.admin.RetryJob(apb.RetryJobRequest(job_id=job_id, idempotency_key=key))
    return answer.job.id


async def _retries_of(db: asyncpg.Connection, job_ids: list[str]) -> list[str]:
    rows = await db.fetch(
        "SELECT id::text FROM jobs WHERE retried_from_job_id = ANY($1::uuid[]) ORDER BY created_at",
        job_ids,
    )
    return [r["id"] for r in rows]


def _selection(user_id: str) -> apb.JobSelection:
    return apb.JobSelection(user_id=user_id, status=job_pb2.JOB_STATUS_FAILED)


async def test_a_bulk_retry_whose_retries_fail_fast_never_retries_a_retry(
    client: Client, db: asyncpg.Connection
) -> None:
    originals = [await _failed(client, "walk-a") for _ in range(3)]
    token, calls, made = "", 0, []
    while calls < 10:  # the defect looped: each page found the retry the last one made
        answer = await client.admin.RetryJobs(
            apb.RetryJobsRequest(selection=_selection("walk-a"), limit=1, page_token=token)
        )
        calls += 1
        for outcome in answer.outcomes:
            assert outcome.new_job_id, outcome.status.message
            made.append(outcome.new_job_id)
            await _fail(client, outcome.new_job_id)  # fails before the walk ends
        token = answer.next_page_token
        if not token:
            break

    assert calls == 3
    retried = await db.fetch(
        "SELECT retried_from_job_id::text AS source FROM jobs WHERE id = ANY($1::uuid[])", made
    )
    assert sorted(r["source"] for r in retried) == sorted(originals)


async def test_a_filter_retries_the_newest_failure_of_a_lineage_and_its_dry_run_counts_one(
    client: Client, db: asyncpg.Connection
) -> None:
    """An original and its failed retry are both failed jobs of "walk-b"; the original was
    dealt with (retried), so a filter matches only the retry: the dry run says 1, not 2
    (issue 31: "retry-many --status failed counts it again")."""
    original = await _failed(client, "walk-b")
    first_retry = await _retry(client, original)
    await _fail(client, first_retry)

    dry = await client.admin.RetryJobs(
        apb.RetryJobsRequest(selection=_selection("walk-b"), dry_run=True)
    )
    assert (dry.matched, [o.job_id for o in dry.outcomes]) == (1, [first_retry])
    answer = await client.admin.RetryJobs(apb.RetryJobsRequest(selection=_selection("walk-b")))

    assert [o.job_id for o in answer.outcomes] == [first_retry]
    assert answer.retried == 1
    assert await _retries_of(db, [first_retry]) == [answer.outcomes[0].new_job_id]
    assert len(await _retries_of(db, [original, first_retry])) == 2  # the first, one new


async def test_a_walk_retries_a_lineage_once_even_when_its_new_retry_fails_at_once(
    client: Client, db: asyncpg.Connection
) -> None:
    """A lineage (an original and its failed retry) and another failed job, a page each:
    the retry the first page made fails before the second page, and the walk does not
    come back to it (nor to the original, which was retried before the walk)."""
    original = await _failed(client, "walk-c")
    first_retry = await _retry(client, original)
    await _fail(client, first_retry)
    other = await _failed(client, "walk-c")

    page = await client.admin.RetryJobs(
        apb.RetryJobsRequest(selection=_selection("walk-c"), limit=1)
    )
    await _fail(client, page.outcomes[0].new_job_id)
    rest = await client.admin.RetryJobs(
        apb.RetryJobsRequest(
            selection=_selection("walk-c"), limit=1, page_token=page.next_page_token
        )
    )

    assert [o.job_id for o in (*page.outcomes, *rest.outcomes)] == [first_retry, other]
    assert not rest.next_page_token
    assert len(await _retries_of(db, [original, first_retry])) == 2


async def test_concurrent_retry_job_and_retry_jobs_make_one_live_retry(
    client: Client, db: asyncpg.Connection
) -> None:
    originals = [await _failed(client, "race-a") for _ in range(8)]

    async def single(job_id: str) -> str:
        try:
            return await _retry(client, job_id)
        except grpc.aio.AioRpcError as error:
            assert type(error_from_rpc(error)) is LiveRetryExists
            return ""

    async def bulk(job_id: str) -> str:
        answer = await client.admin.RetryJobs(
            apb.RetryJobsRequest(selection=apb.JobSelection(job_ids=[job_id]))
        )
        (outcome,) = answer.outcomes
        if not outcome.new_job_id:
            assert type(error_from_status(outcome.status)) is LiveRetryExists
        return outcome.new_job_id

    made = await asyncio.gather(
        *(call(job_id) for job_id in originals for call in (single, bulk, single, bulk))
    )

    assert len([m for m in made if m]) == len(originals)
    for original in originals:
        assert len(await _retries_of(db, [original])) == 1


async def test_the_database_refuses_a_second_live_retry_of_an_original(
    client: Client, db: asyncpg.Connection
) -> None:
    """Whatever writes it (a replica of this release or another): the partial unique index
    holds one live retry per original."""
    original = await _failed(client, "race-b")
    first_retry = await _retry(client, original)
    await _fail(client, first_retry)
    await _retry(client, first_retry)  # the lineage's live retry

    with pytest.raises(asyncpg.UniqueViolationError):
        await db.execute("UPDATE jobs SET status = 'queued' WHERE id = $1", first_retry)


async def test_a_retry_of_a_retry_belongs_to_the_original_lineage(
    client: Client, db: asyncpg.Connection
) -> None:
    original = await _failed(client, "lineage")
    first_retry = await _retry(client, original)
    await _fail(client, first_retry)
    second_retry = await _retry(client, first_retry)

    # while the second is live, neither the original nor the failed first is retried
    for job_id in (original, first_retry):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await _retry(client, job_id)
        error = error_from_rpc(raised.value)
        assert type(error) is LiveRetryExists
        assert second_retry in error.message
    roots = await db.fetch(
        "SELECT retry_root_id::text AS root FROM jobs WHERE id = ANY($1::uuid[])",
        [first_retry, second_retry],
    )
    assert {r["root"] for r in roots} == {original}


async def test_retry_job_with_a_key_answers_the_retry_it_made(
    client: Client, db: asyncpg.Connection
) -> None:
    original = await _failed(client, "keyed")
    other = await _failed(client, "keyed")

    first = await _retry(client, original, key="op-1")
    again = await _retry(client, original, key="op-1")
    await _fail(client, first)
    after_it_failed = await _retry(client, original, key="op-1")

    assert first == again == after_it_failed
    assert await _retries_of(db, [original]) == [first]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _retry(client, other, key="op-1")  # the key names another job's retry
    assert type(error_from_rpc(raised.value)) is IdempotencyKeyReused
    assert await _retries_of(db, [other]) == []


async def test_concurrent_retry_jobs_with_one_key_make_one_retry(
    client: Client, db: asyncpg.Connection
) -> None:
    original = await _failed(client, "keyed-race")

    made = await asyncio.gather(*(_retry(client, original, key="op-2") for _ in range(6)))

    assert len(set(made)) == 1
    assert await _retries_of(db, [original]) == [made[0]]


async def test_retry_job_without_a_key_is_refused_while_the_first_retry_is_live(
    client: Client, db: asyncpg.Connection
) -> None:
    original = await _failed(client, "unkeyed")
    first = await _retry(client, original)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _retry(client, original)

    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert first in error_from_rpc(raised.value).message
    assert await _retries_of(db, [original]) == [first]
