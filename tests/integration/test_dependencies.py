"""Jobs that wait for other jobs (issue 30), against real PostgreSQL and NATS, driven by
hand through ExecutorService: a dependent job waits CREATED until its last dependency
ends, exactly once; each dependency policy; the cancel cascade; an operator's re-run of a
failed dependency re-arms the join; the results a leased join reads; bad requests refused
with nothing written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from shared.errors import InvalidInput, JobNotFound, LeaseLost
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client, count_rows, result_request
from tests.support.wait import eventually

S = job_pb2
RUN, FAIL, CANCEL = (
    S.DEPENDENCY_POLICY_RUN,
    S.DEPENDENCY_POLICY_FAIL,
    S.DEPENDENCY_POLICY_CANCEL,
)


async def create(
    client: Client,
    depends_on: list[str] = (),
    policy: int = 0,
    user_id: str = "user-1",
    **more: Any,
) -> Any:
    request = jpb.CreateJobRequest(
        user_id=user_id,
        job_type="synthetic",
        input=struct_from_dict({"sleep_ms": 0}),
        depends_on=depends_on,
        dependency_policy=policy,
        **more,
    )
    return (await client.jobs.CreateJob(request)).job


async def succeed(client: Client, job_id: str, n: int = 1) -> None:
    locked = (await client.lock(job_id)).job
    assert locked.job_id == job_id
    answer = await client.executor.SubmitResult(
        result_request(job_id, locked.lease_token, {"attempt": 1, "data": f"out-{n}"})
    )
    assert answer.status == S.JOB_STATUS_SUCCEEDED


async def fail(client: Client, job_id: str) -> None:
    locked = (await client.lock(job_id)).job
    answer = await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job_id, lease_token=locked.lease_token, error_code="JOB_REJECTED"
        )
    )
    assert answer.status == S.JOB_STATUS_FAILED


async def has_ended(client: Client, job_id: str) -> bool:
    return (await client.get(job_id)).status in (
        S.JOB_STATUS_SUCCEEDED,
        S.JOB_STATUS_FAILED,
        S.JOB_STATUS_CANCELLED,
    )


async def due(db: asyncpg.Connection, job_id: str) -> bool:
    """The job may be granted now: waiting and due (the resolver made it so)."""
    return bool(
        await db.fetchval(
            "SELECT status IN ('created', 'queued') AND next_run_at <= now() FROM jobs"
            " WHERE id = $1",
            job_id,
        )
    )


async def test_a_join_waits_for_every_dependency_then_runs_once(
    client: Client, db: asyncpg.Connection
) -> None:
    a, b = await create(client), await create(client)
    join = await create(client, [a.id, b.id], RUN)

    assert join.status == S.JOB_STATUS_CREATED
    assert (join.dependencies_total, join.dependencies_pending) == (2, 2)
    assert sorted(join.depends_on) == sorted([a.id, b.id])
    assert not join.HasField("next_run_at")
    read = await client.get(join.id)
    assert read.hold.reason == S.JobHold.REASON_WAITING_FOR_DEPENDENCIES
    assert "2 of its 2" in read.hold.detail
    assert list((await client.get(a.id)).dependent_job_ids) == [join.id]
    # not granted while it waits, whatever asks for it
    assert (await client.lock(join.id)).outcome != epb.LOCK_OUTCOME_LOCKED

    await succeed(client, a.id)
    assert (await client.get(join.id)).dependencies_pending == 1
    assert not await due(db, join.id)
    await succeed(client, b.id)

    await eventually(lambda: due(db, join.id), message="the join becomes due")
    assert (await client.get(join.id)).dependencies_pending == 0
    locked = (await client.lock(join.id)).job
    assert (locked.job_id, locked.dependency_count) == (join.id, 2)
    uncounted = await db.fetchval(
        "SELECT count(*) FROM job_dependencies WHERE job_id = $1 AND NOT counted", join.id
    )
    assert uncounted == 0
    assert await db.fetchval("SELECT dependencies_uncounted FROM jobs WHERE id = $1", join.id) == 0
    dispatch = await db.fetch(
        "SELECT status FROM outbox_events WHERE aggregate_id = $1 AND event_type = 'job.dispatch'",
        join.id,
    )
    assert len(dispatch) == 1  # its one dispatch row, made due once


async def test_a_dependency_that_ended_before_the_join_was_created_counts_at_once(
    client: Client, db: asyncpg.Connection
) -> None:
    a = await create(client)
    await succeed(client, a.id)

    join = await create(client, [a.id])

    assert join.dependencies_pending == 0
    await eventually(lambda: due(db, join.id), message="the join becomes due")


@pytest.mark.parametrize(
    ("policy", "ends", "code"),
    [
        (FAIL, S.JOB_STATUS_FAILED, "DEPENDENCY_FAILED"),
        (CANCEL, S.JOB_STATUS_CANCELLED, "DEPENDENCY_CANCELLED"),
    ],
)
async def test_a_failed_dependency_ends_the_join_by_its_policy_without_running_it(
    client: Client, db: asyncpg.Connection, policy: int, ends: int, code: str
) -> None:
    a, b = await create(client), await create(client)
    join = await create(client, [a.id, b.id], policy)

    await fail(client, a.id)  # b still runs: the join ends anyway

    await eventually(lambda: has_ended(client, join.id), message="the join ends")
    ended = await client.get(join.id)
    assert (ended.status, ended.error_code, ended.attempt_count) == (ends, code, 0)
    events = [(e.from_status, e.to_status) for e in ended.events]
    assert events == [
        (S.JOB_STATUS_UNSPECIFIED, S.JOB_STATUS_CREATED),
        (S.JOB_STATUS_CREATED, ends),
    ]
    domain = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE aggregate_id = $1 AND event_type = $2",
        join.id,
        f"job.{'failed' if ends == S.JOB_STATUS_FAILED else 'cancelled'}",
    )
    assert domain == 1
    # its dispatch row never becomes a work token
    assert not await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE aggregate_id = $1"
        " AND event_type = 'job.dispatch'",
        join.id,
    )


async def test_run_anyway_counts_a_failed_dependency_as_done(
    client: Client, db: asyncpg.Connection
) -> None:
    a, b = await create(client), await create(client)
    join = await create(client, [a.id, b.id], RUN)

    await fail(client, a.id)
    await succeed(client, b.id)

    await eventually(lambda: due(db, join.id), message="the join becomes due")
    locked = (await client.lock(join.id)).job
    page = await client.executor.FetchDependencyResults(
        epb.FetchDependencyResultsRequest(job_id=join.id, lease_token=locked.lease_token)
    )
    by_id = {r.job_id: r for r in page.results}
    assert by_id[a.id].status == S.JOB_STATUS_FAILED
    assert by_id[a.id].error_code == "JOB_REJECTED"
    assert not by_id[a.id].HasField("output")
    assert by_id[b.id].status == S.JOB_STATUS_SUCCEEDED
    assert dict_from_struct(by_id[b.id].output) == {"attempt": 1, "data": "out-1"}
    assert not page.more


async def test_cancel_cascades_along_a_chain_by_each_policy(
    client: Client, db: asyncpg.Connection
) -> None:
    a = await create(client)
    b = await create(client, [a.id], CANCEL)
    c = await create(client, [b.id], FAIL)
    d = await create(client, [c.id], RUN)

    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=a.id, user_id="user-1"))

    await eventually(lambda: due(db, d.id), message="the cascade reaches the job that runs anyway")
    assert (await client.get(b.id)).status == S.JOB_STATUS_CANCELLED
    assert (await client.get(c.id)).error_code == "DEPENDENCY_FAILED"


async def test_paging_the_results_of_a_join_and_the_fence(
    client: Client, db: asyncpg.Connection
) -> None:
    deps = [await create(client) for _ in range(3)]
    for n, dep in enumerate(deps):
        await succeed(client, dep.id, n)
    join = await create(client, [d.id for d in deps])
    await eventually(lambda: due(db, join.id), message="the join becomes due")
    locked = (await client.lock(join.id)).job

    seen, after = [], ""
    while True:
        page = await client.executor.FetchDependencyResults(
            epb.FetchDependencyResultsRequest(
                job_id=join.id, lease_token=locked.lease_token, after_job_id=after, page_size=1
            )
        )
        seen += [r.job_id for r in page.results]
        if not page.more:
            break
        after = page.results[-1].job_id
    assert seen == sorted(d.id for d in deps)

    with pytest.raises(grpc.aio.AioRpcError) as lost:
        await client.executor.FetchDependencyResults(
            epb.FetchDependencyResultsRequest(job_id=join.id, lease_token=deps[0].id)
        )
    assert isinstance(error_from_rpc(lost.value), LeaseLost)


async def test_an_admin_retry_of_a_failed_dependency_re_arms_the_join(
    client: Client, db: asyncpg.Connection
) -> None:
    a, b = await create(client), await create(client)
    join = await create(client, [a.id, b.id], FAIL)
    await succeed(client, b.id)
    await fail(client, a.id)
    await eventually(lambda: has_ended(client, join.id), message="the join fails")
    assert (await client.get(join.id)).status == S.JOB_STATUS_FAILED

    a2 = (await client.admin.RetryJob(apb.RetryJobRequest(job_id=a.id))).job

    rerun_id = await eventually(
        lambda: db.fetchval("SELECT id::text FROM jobs WHERE retried_from_job_id = $1", join.id),
        message="the join is re-run",
    )
    rerun = await client.get(rerun_id)
    assert rerun.status == S.JOB_STATUS_CREATED
    assert sorted(rerun.depends_on) == sorted([a2.id, b.id])
    assert rerun.dependencies_pending == 1  # b had succeeded already
    await succeed(client, a2.id)
    await eventually(lambda: due(db, rerun_id), message="the re-run join becomes due")
    assert (await client.lock(rerun_id)).job.job_id == rerun_id


async def test_an_admin_retry_makes_a_waiting_join_wait_for_the_re_run_too(
    client: Client, db: asyncpg.Connection
) -> None:
    a, b = await create(client), await create(client)
    join = await create(client, [a.id, b.id], RUN)
    await fail(client, a.id)
    assert (await client.get(join.id)).dependencies_pending == 1

    a2 = (await client.admin.RetryJob(apb.RetryJobRequest(job_id=a.id))).job

    waiting = await client.get(join.id)
    assert (waiting.dependencies_pending, waiting.dependencies_total) == (2, 3)
    await succeed(client, b.id)
    assert not await due(db, join.id)
    await succeed(client, a2.id)
    await eventually(lambda: due(db, join.id), message="the join becomes due")


# Each bad request, given the id of an existing job of user-1.
BAD: dict[str, tuple[Callable[[str], dict[str, Any]], type, str]] = {
    "not a uuid": (lambda a: {"depends_on": [a, "not-a-uuid"]}, InvalidInput, "depends_on[1]"),
    "policy alone": (lambda a: {"dependency_policy": RUN}, InvalidInput, "dependency_policy"),
    "with a delay": (
        lambda a: {"depends_on": [a], "delay": Duration(seconds=5)},
        InvalidInput,
        "depends_on",
    ),
    "named twice": (lambda a: {"depends_on": [a, a.upper()]}, InvalidInput, "depends_on[1]"),
    "another user's": (
        lambda a: {"depends_on": [a], "user_id": "user-2"},
        JobNotFound,
        "depends_on[0]",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
async def test_a_bad_dependency_is_refused_with_nothing_written(
    client: Client, database_url: str, case: str
) -> None:
    change, error, field = BAD[case]
    a = await create(client)
    request: dict[str, Any] = {"user_id": "user-1", **change(a.id)}
    before = await count_rows(database_url)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.jobs.CreateJob(
            jpb.CreateJobRequest(
                job_type="synthetic", input=struct_from_dict({"sleep_ms": 0}), **request
            )
        )

    found = error_from_rpc(refused.value)
    assert isinstance(found, error)
    assert field in [v.field for v in found.violations]
    assert await count_rows(database_url) == before


async def test_a_join_whose_dependencies_ended_waits_for_their_count_not_for_a_time(
    client: Client, db: asyncpg.Connection, database_url: str
) -> None:
    """Between the last dependency's end and the resolver's count, the join is still due at
    no time (UNTIL_DEPENDENCIES_END): its hold said NOT_DUE, "waits for its time", with no
    time (issue 43, the model-based test's join_hold)."""
    a = await create(client)
    join = await create(client, [a.id], RUN)
    counting = await asyncpg.connect(database_url)
    try:
        async with counting.transaction():  # the resolver cannot make the join due meanwhile
            await counting.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", join.id)
            await succeed(client, a.id)
            held = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=join.id))).job

            assert held.status == S.JOB_STATUS_CREATED
            assert held.dependencies_pending == 0
            assert held.hold.reason == S.JobHold.REASON_WAITING_FOR_DEPENDENCIES
            assert "have ended" in held.hold.detail
            assert not held.HasField("next_run_at")
    finally:
        await counting.close()
    await eventually(lambda: due(db, join.id), message="the join becomes due")
    held = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=join.id))).job
    assert held.hold.reason != S.JobHold.REASON_WAITING_FOR_DEPENDENCIES
