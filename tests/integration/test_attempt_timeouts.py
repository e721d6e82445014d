"""The job service enforces a job's timeout: a hung attempt whose worker keeps heartbeating
is ended by the reaper as a TIMEOUT within timeout + grace (+ one reaper period), as the
definition's abort strategy says, the grace a quarter of the timeout at most
JOBS_ATTEMPT_TIMEOUT_GRACE_S (issue 43: a 5 s timeout ends within 10 s of the grant at the
defaults); its heartbeats are then answered as lease lost, its
concurrency key's slot is free for the next job, and its late result is refused. Driven
by a raw gRPC client against real PostgreSQL and NATS."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest

from job_service.domain.attempts import timeout_grace_s
from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.constants import Queue
from shared.errors import LeaseLost
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.registry import AbortStrategy, Registry
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client, open_channel, result_request, running_job_service
from tests.support.wait import eventually

TIMEOUT_S, GRACE_S, REAPER_S = 1.0, 1.0, 0.2
# what the job service allows past a 1 s timeout under a 1 s cap: a quarter of it
PAST_S = timeout_grace_s(TIMEOUT_S, GRACE_S)
# a job type with a 5 s timeout, against the default grace and reaper interval
HANGS_5S = dataclasses.replace(
    SYNTHETIC, job_type="hangs_5s", timeout_s=5.0, abort_strategy=AbortStrategy.FAIL
)
# One at a time per user, failed at the first timeout.
HANGS = dataclasses.replace(
    SYNTHETIC,
    job_type="hangs",
    timeout_s=TIMEOUT_S,
    abort_strategy=AbortStrategy.FAIL,
    concurrency_key="user",
    concurrency_limit=1,
)
# Retried after a timeout.
HANGS_RETRIED = dataclasses.replace(
    SYNTHETIC, job_type="hangs_retried", timeout_s=TIMEOUT_S, abort_strategy=AbortStrategy.RETRY
)
NO_JOB = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
async def client(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    async with (
        running_job_service(
            database_url,
            nats_url,
            Registry([SYNTHETIC, HANGS, HANGS_RETRIED]),
            attempt_timeout_grace_s=GRACE_S,
            reaper_interval_s=REAPER_S,
            lease_ttl_s=5,
            heartbeat_interval_s=0.2,
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Client(channel)


async def lock_from_queue(client: Client) -> list[epb.LockJobResponse]:
    answer = await client.executor.LockJobs(
        epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=NO_JOB, worker_id="hung")],
            queue=Queue.INTERACTIVE.value,
        )
    )
    return [a for a in answer.responses if a.outcome == epb.LOCK_OUTCOME_LOCKED]


async def heartbeat_until_refused(client: Client, job_id: str, token: str) -> float:
    """Heartbeats as a hung worker's heartbeat task does, until refused: when that was."""
    give_up = time.monotonic() + 15
    while time.monotonic() < give_up:
        try:
            await client.executor.Heartbeat(
                epb.HeartbeatRequest(job_id=job_id, lease_token=token, progress=0.5)
            )
        except grpc.aio.AioRpcError as refused:
            assert isinstance(error_from_rpc(refused), LeaseLost)
            return time.monotonic()
        # the worker's own heartbeat period: a wait by design, not a synchronisation
        await asyncio.sleep(0.2)
    raise AssertionError("the lease was still renewed 15 s after the grant")


async def test_a_hung_attempt_that_keeps_heartbeating_is_ended_as_a_timeout(
    client: Client, db: asyncpg.Connection
) -> None:
    hung = (await client.create(user_id="u1", job_type="hangs")).job
    behind = (await client.create(user_id="u1", job_type="hangs")).job  # same key: waits
    [lease] = await lock_from_queue(client)
    locked_at = time.monotonic()

    refused_at = await heartbeat_until_refused(client, hung.id, lease.job.lease_token)
    ended = await eventually(
        lambda: db.fetchrow(
            "SELECT status, error_code FROM jobs WHERE id = $1 AND status <> 'running'", hung.id
        ),
        timeout=10,
    )
    [next_lease] = await eventually(lambda: lock_from_queue(client), timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await client.executor.SubmitResult(
            result_request(hung.id, lease.job.lease_token, {"attempt": 1, "data": "late"})
        )

    assert lease.job.job_id == hung.id
    assert tuple(ended) == ("failed", "TIMEOUT")
    # never before the timeout and its grace, and within a reaper period (and slack) of it
    assert TIMEOUT_S + PAST_S - 0.1 <= refused_at - locked_at <= TIMEOUT_S + PAST_S + 2.0
    assert next_lease.job.job_id == behind.id  # the key's slot is free
    assert isinstance(error_from_rpc(late.value), LeaseLost)
    assert await db.fetchval("SELECT output_hash IS NULL FROM jobs WHERE id = $1", hung.id)


async def test_a_timed_out_attempt_is_retried_when_its_definition_says_so(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="hangs_retried")).job
    lease = await client.lock(job.id, "hung")

    await heartbeat_until_refused(client, job.id, lease.job.lease_token)
    ended = await eventually(
        lambda: db.fetchrow(
            "SELECT status, error_code, attempt_count FROM jobs"
            " WHERE id = $1 AND status <> 'running'",
            job.id,
        ),
        timeout=10,
    )
    event = await db.fetchrow(
        "SELECT reason, worker_id FROM job_events WHERE job_id = $1 AND to_status = 'retrying'",
        job.id,
    )

    assert tuple(ended) == ("retrying", "TIMEOUT", 1)
    assert tuple(event) == ("TIMEOUT", "hung")


async def test_a_lease_is_never_granted_or_renewed_past_the_attempts_deadline(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="hangs_retried")).job
    lease = await client.lock(job.id, "w")
    beat = await client.executor.Heartbeat(
        epb.HeartbeatRequest(job_id=job.id, lease_token=lease.job.lease_token, progress=-1)
    )
    deadline = await db.fetchval(
        "SELECT locked_at + $2 * interval '1 second' FROM jobs WHERE id = $1",
        job.id,
        TIMEOUT_S + PAST_S,
    )

    # the lease TTL is 5 s, the deadline 1 s + 0.25 s after the grant
    assert lease.job.lease_expires_at.ToDatetime().timestamp() == pytest.approx(
        deadline.timestamp(), abs=0.001
    )
    assert beat.lease_expires_at.ToDatetime().timestamp() == pytest.approx(
        deadline.timestamp(), abs=0.001
    )


async def test_a_5s_timeout_held_by_a_worker_heartbeating_forever_ends_within_10s_of_its_grant(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """Issue 43, at the default grace and reaper interval (1 s): ended 30 s past a 5 s
    timeout before, now at most min(timeout, 30 s) past it."""
    async with (
        running_job_service(
            database_url,
            nats_url,
            Registry([SYNTHETIC, HANGS_5S]),
            reaper_interval_s=1.0,
            lease_ttl_s=5,
            heartbeat_interval_s=1.0,
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        job = (await client.create(job_type="hangs_5s")).job
        lease = await client.lock(job.id, "hung")
        await heartbeat_until_refused(client, job.id, lease.job.lease_token)
        ended = await eventually(
            lambda: db.fetchrow(
                "SELECT status, error_code, extract(epoch FROM finished_at - locked_at)::float"
                " AS after_s FROM jobs WHERE id = $1 AND status <> 'running'",
                job.id,
            ),
            timeout=15,
        )
    print(f"a 5 s timeout ended {ended['after_s']:.2f} s after its grant")
    assert (ended["status"], ended["error_code"]) == ("failed", "TIMEOUT")
    assert 5.0 <= ended["after_s"] <= 10.0
