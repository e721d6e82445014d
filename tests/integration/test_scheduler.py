"""The scheduler, driven as a worker drives it: LockJobs with work tokens of a queue, and
the database deciding which jobs each token grants — priority with aging, fair share,
concurrency keys (across two replicas), queue pause, worker versions and delayed jobs.
Against real PostgreSQL and NATS; no worker process (the claims are the subject)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.constants import Queue
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import Registry
from tests.support.stack import Client, open_channel, result_request, running_job_service
from tests.support.wait import eventually

QUEUE = Queue.INTERACTIVE.value
KEYED = dataclasses.replace(
    SYNTHETIC, job_type="keyed", concurrency_key="user", concurrency_limit=2
)
REGISTRY = [SYNTHETIC, KEYED]
RUNS_ALL = ["synthetic@1.0.0", "keyed@1.0.0"]


@pytest.fixture
async def sched(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    """A job service with a short priority step (0.5 s per level), a long fair-share
    quantum (1 s: a backlog is spaced out however slowly the test creates it) and the
    keyed type."""
    async with (
        running_job_service(
            database_url,
            nats_url,
            Registry(REGISTRY),
            sched_priority_step_s=0.5,
            sched_fair_quantum_s=1.0,
            lease_ttl_s=600,
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Client(channel)


async def create(
    client: Client,
    user: str = "u1",
    job_type: str = "synthetic",
    priority: int | None = None,
    **extra: object,
) -> job_pb2.Job:
    request = jpb.CreateJobRequest(
        user_id=user, job_type=job_type, input=struct_from_dict({}), **extra
    )
    if priority is not None:
        request.priority = priority
    return (await client.jobs.CreateJob(request)).job


async def claim(
    client: Client, tokens: int, worker: str = "w1", runnable: list[str] | None = None
) -> list[epb.LockJobResponse]:
    response = await client.executor.LockJobs(
        epb.LockJobsRequest(
            requests=[
                epb.LockJobRequest(job_id="00000000-0000-0000-0000-000000000000", worker_id=worker)
            ]
            * tokens,
            queue=QUEUE,
            runnable_definitions=RUNS_ALL if runnable is None else runnable,
        )
    )
    return list(response.responses)


def granted(answers: list[epb.LockJobResponse]) -> list[str]:
    return [a.job.job_id for a in answers if a.outcome == epb.LOCK_OUTCOME_LOCKED]


async def test_a_token_grants_the_highest_priority_job_not_the_one_it_names(
    sched: Client,
) -> None:
    low = [(await create(sched, priority=0)).id for _ in range(5)]
    high = [(await create(sched, priority=5)).id for _ in range(2)]

    first = await claim(sched, 2)
    rest = await claim(sched, 10)

    assert granted(first) == high
    assert granted(rest) == low  # first in, first out within a priority
    # surplus tokens are dropped: nothing else waits
    assert [a.outcome for a in rest[5:]] == [epb.LOCK_OUTCOME_UNAVAILABLE] * 5


async def test_waiting_ages_a_job_past_later_higher_priority_work(
    sched: Client, db: asyncpg.Connection
) -> None:
    low = await create(sched, priority=0)
    # One level is worth 0.5 s of waiting: once the low job has waited 2 levels' worth,
    # work of priority 2 created now lines up behind it.
    await eventually(
        lambda: db.fetchval(
            "SELECT now() - created_at > interval '1.1 seconds' FROM jobs WHERE id = $1", low.id
        ),
        timeout=5,
    )
    later_high = await create(sched, priority=2)
    much_higher = await create(sched, priority=9)

    assert granted(await claim(sched, 1)) == [much_higher.id]
    assert granted(await claim(sched, 1)) == [low.id]
    assert granted(await claim(sched, 1)) == [later_high.id]


async def test_a_small_user_is_not_queued_behind_a_big_users_backlog(sched: Client) -> None:
    big = [(await create(sched, user="big")).id for _ in range(60)]
    small = [(await create(sched, user="small")).id for _ in range(3)]

    order: list[str] = []
    while len(order) < len(big) + len(small):
        order += granted(await claim(sched, 4))

    last_small = max(order.index(job_id) for job_id in small)
    assert last_small < 20, f"small user's jobs granted at {sorted(map(order.index, small))}"
    assert [j for j in order if j in big] == big  # the backlog keeps its own order


async def test_a_concurrency_key_never_runs_more_than_its_limit(
    sched: Client, db: asyncpg.Connection
) -> None:
    mine = [(await create(sched, user="u1", job_type="keyed")).id for _ in range(5)]
    theirs = [(await create(sched, user="u2", job_type="keyed")).id for _ in range(3)]

    answers = await claim(sched, 10)

    assert sorted(granted(answers)) == sorted(mine[:2] + theirs[:2])
    assert [a.outcome for a in answers[4:]] == [epb.LOCK_OUTCOME_UNAVAILABLE] * 6
    # one of u1's jobs ends: its end issues a token, and the next u1 job can be granted
    lease = next(a.job for a in answers if a.job.job_id == mine[0])
    await sched.executor.SubmitResult(
        result_request(mine[0], lease.lease_token, {"attempt": 1, "data": "x"})
    )
    release = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE dedupe_key = $1",
        f"job.dispatch:{mine[0]}:release:{lease.lease_token}",
    )
    assert release == 1
    assert granted(await claim(sched, 10)) == [mine[2]]
    running = await db.fetch(
        "SELECT concurrency_key, count(*) AS n FROM jobs WHERE status = 'running'"
        " GROUP BY concurrency_key ORDER BY 1"
    )
    assert [(r["concurrency_key"], r["n"]) for r in running] == [
        ("keyed:user=u1", 2),
        ("keyed:user=u2", 2),
    ]


async def test_claims_racing_on_two_replicas_never_exceed_a_key_limit(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    registry = Registry(REGISTRY)
    async with (
        running_job_service(database_url, nats_url, registry, lease_ttl_s=600) as one,
        running_job_service(database_url, nats_url, registry, lease_ttl_s=600) as two,
        open_channel(f"127.0.0.1:{one.port}") as c1,
        open_channel(f"127.0.0.1:{two.port}") as c2,
    ):
        first, second = Client(c1), Client(c2)
        for _ in range(20):
            await create(first, user="u1", job_type="keyed")
        answers = await asyncio.gather(
            *(claim(client, 1, worker=f"w{n}") for n in range(10) for client in (first, second))
        )

    assert sum(len(granted(a)) for a in answers) == 2
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'running'") == 2


async def test_a_paused_queue_grants_nothing_and_resuming_reissues_its_tokens(
    sched: Client, db: asyncpg.Connection
) -> None:
    paused = await sched.admin.PauseQueue(apb.PauseQueueRequest(queue=QUEUE))
    job = await create(sched)  # creation still works

    answers = await claim(sched, 3)
    queues = {q.name: q for q in (await sched.admin.ListQueues(apb.ListQueuesRequest())).queues}

    assert paused.queue.paused and paused.queue.paused_by == "test-all"
    assert granted(answers) == []
    assert [a.outcome for a in answers] == [epb.LOCK_OUTCOME_UNAVAILABLE] * 3
    assert (queues[QUEUE].paused, queues[QUEUE].waiting) == (True, 1)
    hold = (await sched.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job.hold
    assert hold.reason == job_pb2.JobHold.REASON_QUEUE_PAUSED

    resumed = await sched.admin.ResumeQueue(apb.ResumeQueueRequest(queue=QUEUE))
    tokens = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE dedupe_key LIKE $1", f"%{job.id}:resume:%"
    )
    assert not resumed.queue.paused
    assert tokens == 1
    assert granted(await claim(sched, 1)) == [job.id]


async def test_pausing_an_unknown_queue_is_refused(sched: Client) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await sched.admin.PauseQueue(apb.PauseQueueRequest(queue="no-such-queue"))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_worker_is_granted_only_the_definition_versions_it_runs(
    sched: Client, db: asyncpg.Connection
) -> None:
    job = await create(sched)

    old = await claim(sched, 2, worker="old", runnable=["synthetic@0.9.0"])
    hold = (await sched.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job.hold
    new = await claim(sched, 1, worker="new", runnable=["synthetic@1.0.0"])

    assert granted(old) == []
    # handed back for a worker that runs it, not dropped
    assert {a.outcome for a in old} == {epb.LOCK_OUTCOME_NOT_DUE}
    assert hold.reason == job_pb2.JobHold.REASON_NO_WORKER_FOR_VERSION
    assert hold.key == "synthetic@1.0.0"
    assert granted(new) == [job.id]
    assert await db.fetchval("SELECT definition_version FROM jobs") == "1.0.0"


async def test_a_delayed_job_waits_created_until_its_time(
    sched: Client, db: asyncpg.Connection
) -> None:
    job = await create(sched, delay=Duration(seconds=1))
    row = await db.fetchrow(
        "SELECT status, next_run_at - created_at AS ahead FROM jobs WHERE id = $1", job.id
    )
    dispatch_at = await db.fetchval(
        "SELECT available_at FROM outbox_events WHERE aggregate_id = $1", job.id
    )
    assert job.status == job_pb2.JOB_STATUS_CREATED and job.HasField("next_run_at")
    # the delay runs from the call (the replica's clock); created_at is the commit's
    assert row["status"] == "created" and row["ahead"] > timedelta(seconds=0.9)
    assert dispatch_at == job.next_run_at.ToDatetime(tzinfo=UTC)
    hold = (await sched.admin.GetJob(apb.AdminGetJobRequest(job_id=job.id))).job.hold
    assert hold.reason == job_pb2.JobHold.REASON_NOT_DUE
    assert granted(await claim(sched, 1)) == []

    async def granted_now() -> list[str]:
        return granted(await claim(sched, 1))

    assert await eventually(granted_now, timeout=5, interval=0.05) == [job.id]
    started = await db.fetchval("SELECT started_at FROM jobs WHERE id = $1", job.id)
    assert started >= job.next_run_at.ToDatetime(tzinfo=UTC)


async def test_a_delayed_job_can_be_cancelled_while_it_waits(sched: Client) -> None:
    job = await create(sched, delay=Duration(seconds=3600))

    cancelled = await sched.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="u1"))

    assert cancelled.job.status == job_pb2.JOB_STATUS_CANCELLED
    assert granted(await claim(sched, 1)) == []


async def test_run_at_in_the_past_means_now_and_bad_schedules_are_refused(
    sched: Client, db: asyncpg.Connection
) -> None:
    past = Timestamp()
    past.FromDatetime(datetime.now(UTC) - timedelta(minutes=5))
    far = Timestamp()
    far.FromDatetime(datetime.now(UTC) + timedelta(days=400))
    job = await create(sched, run_at=past)
    assert job.status == job_pb2.JOB_STATUS_QUEUED

    refusals = {}
    for name, extra in {
        "both": {"run_at": far, "delay": Duration(seconds=5)},
        "negative": {"delay": Duration(seconds=-5)},
        "too far": {"run_at": far},
    }.items():
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await create(sched, user="other", **extra)
        refusals[name] = raised.value.code()

    assert set(refusals.values()) == {grpc.StatusCode.INVALID_ARGUMENT}
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE user_id = 'other'") == 0


async def test_a_job_delayed_an_hour_survives_a_restart_and_can_then_be_cancelled(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url, Registry(REGISTRY)) as first,
        open_channel(f"127.0.0.1:{first.port}") as channel,
    ):
        job = await create(Client(channel), delay=Duration(seconds=3600))

    async with (
        running_job_service(database_url, nats_url, Registry(REGISTRY)) as second,
        open_channel(f"127.0.0.1:{second.port}") as channel,
    ):
        client = Client(channel)
        after = await client.get(job.id, "u1")
        nothing = await claim(client, 1)
        cancelled = await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="u1"))

    assert after.status == job_pb2.JOB_STATUS_CREATED
    assert after.next_run_at == job.next_run_at
    assert granted(nothing) == []
    assert cancelled.job.status == job_pb2.JOB_STATUS_CANCELLED
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job.id) == "cancelled"


async def test_results_are_granted_only_the_backlog_not_a_job_due_just_now(
    sched: Client, database_url: str
) -> None:
    await create(sched)
    [running] = granted(await claim(sched, 1, worker="w1"))
    fresh = (await create(sched)).id
    backlog = (await create(sched)).id
    db = await asyncpg.connect(database_url)
    try:  # due a second ago: the backlog lock on submit is for
        await db.execute(
            "UPDATE jobs SET queued_at = now() - interval '1 second' WHERE id = $1", backlog
        )
        lease = await db.fetchval("SELECT lease_token::text FROM jobs WHERE id = $1", running)
    finally:
        await db.close()

    answer = await sched.executor.SubmitResults(
        epb.SubmitResultsRequest(
            requests=[result_request(running, lease, {"done": True})],
            next_grants=[epb.QueueSlots(queue=QUEUE, slots=2)],
            worker_id="w1",
            runnable_definitions=RUNS_ALL,
        )
    )

    # the fresh job, first in line, is left to its push or its dispatch message
    assert [g.job_id for g in answer.grants] == [backlog]
    assert granted(await claim(sched, 1, worker="w2")) == [fresh]
