"""ExecutorService driven by hand, as a worker would: leases, fencing, retries decided by
the job service, cancellation, and the lease reaper — against real PostgreSQL and NATS."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import grpc
import pytest
from nats.aio.client import Client as NatsClient

from shared.constants import CANCEL_SUBJECT
from shared.errors import JobAlreadyCancelled, JobNotCancellable, JobNotFound, LeaseLost
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client, result_request
from tests.support.wait import eventually

OUTPUT = {"attempt": 1, "data": "xyz"}


def result(job_id: str, token: str) -> epb.SubmitResultRequest:
    return result_request(job_id, token, OUTPUT)


def failure(job_id: str, token: str, code: str, message: str = "") -> epb.SubmitFailureRequest:
    return epb.SubmitFailureRequest(
        job_id=job_id, lease_token=token, error_code=code, error_message=message
    )


async def raised_error(call):  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value.code(), error_from_rpc(raised.value)


async def status_of(db: asyncpg.Connection, job_id: str) -> str:
    return await db.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)


async def test_lock_takes_a_lease_once(client: Client, db: asyncpg.Connection) -> None:
    job = (await client.create()).job

    first = await client.lock(job.id, "worker-a")
    second = await client.lock(job.id, "worker-b")

    assert first.outcome == epb.LOCK_OUTCOME_LOCKED
    assert (first.job.attempt, first.job.job_type) == (1, "synthetic")
    assert second.outcome == epb.LOCK_OUTCOME_UNAVAILABLE
    row = await db.fetchrow("SELECT status, locked_by, lease_token::text FROM jobs")
    assert tuple(row) == ("running", "worker-a", first.job.lease_token)


async def test_lock_of_an_unknown_or_malformed_job_is_unavailable(client: Client) -> None:
    missing = await client.lock("00000000-0000-0000-0000-000000000000")
    malformed = await client.lock("not-a-uuid")

    assert missing.outcome == malformed.outcome == epb.LOCK_OUTCOME_UNAVAILABLE


async def test_heartbeat_extends_the_lease_by_the_database_clock(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job
    before = await db.fetchval("SELECT lock_until FROM jobs")

    ack = await client.executor.Heartbeat(
        epb.HeartbeatRequest(job_id=job.id, lease_token=lease.lease_token, progress=0.4)
    )

    after, progress = await db.fetchrow("SELECT lock_until, progress FROM jobs")
    assert after > before
    assert ack.lease_expires_at.ToDatetime().replace(tzinfo=after.tzinfo) == after
    assert not ack.cancel_requested
    assert progress == pytest.approx(0.4)


async def test_submit_result_commits_once_and_a_repeat_is_idempotent(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job

    first = await client.executor.SubmitResult(result(job.id, lease.lease_token))
    again = await client.executor.SubmitResult(result(job.id, lease.lease_token))

    assert first.status == again.status == job_pb2.JOB_STATUS_SUCCEEDED
    view = await client.get(job.id)
    assert view.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert dict(view.output) == OUTPUT
    assert [a.artifact_id for a in view.artifacts] == [f"syn_{job.id}"]
    assert [(e.from_status, e.to_status) for e in view.events] == [
        (job_pb2.JOB_STATUS_UNSPECIFIED, job_pb2.JOB_STATUS_QUEUED),
        (job_pb2.JOB_STATUS_QUEUED, job_pb2.JOB_STATUS_RUNNING),
        (job_pb2.JOB_STATUS_RUNNING, job_pb2.JOB_STATUS_SUCCEEDED),
    ]
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 1
    assert (
        await db.fetchval("SELECT count(*) FROM outbox_events WHERE event_type = 'job.succeeded'")
        == 1
    )


async def test_a_stale_lease_token_is_refused_and_changes_nothing(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(fail="retryable", fail_times=1)).job
    stale = (await client.lock(job.id)).job.lease_token
    await client.executor.SubmitFailure(failure(job.id, stale, "PROVIDER_UNAVAILABLE"))
    await db.execute("UPDATE jobs SET next_run_at = now()")  # due at once
    current = (await client.lock(job.id)).job
    snapshot = dict(await db.fetchrow("SELECT * FROM jobs"))

    for call in (
        client.executor.SubmitResult(result(job.id, stale)),
        client.executor.SubmitFailure(failure(job.id, stale, "PROVIDER_TIMEOUT")),
        client.executor.Heartbeat(epb.HeartbeatRequest(job_id=job.id, lease_token=stale)),
    ):
        code, error = await raised_error(call)
        assert code == grpc.StatusCode.ABORTED
        assert isinstance(error, LeaseLost)

    assert dict(await db.fetchrow("SELECT * FROM jobs")) == snapshot
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 0
    assert current.attempt == 2


async def test_retryable_failure_schedules_a_retry_with_a_new_dispatch(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job

    answer = await client.executor.SubmitFailure(
        failure(job.id, lease.lease_token, "PROVIDER_UNAVAILABLE", "upstream 503 at 10.0.0.7")
    )

    assert answer.status == job_pb2.JOB_STATUS_RETRYING
    row = await db.fetchrow(
        "SELECT status, next_run_at > now() AS later, error_code, public_error_message,"
        " internal_error_message FROM jobs"
    )
    assert row["status"] == "retrying" and row["later"]
    assert row["error_code"] == "PROVIDER_UNAVAILABLE"
    assert "10.0.0.7" not in row["public_error_message"]
    assert row["internal_error_message"] == "upstream 503 at 10.0.0.7"
    dispatches = await db.fetch(
        "SELECT payload, available_at FROM outbox_events WHERE event_type = 'job.dispatch'"
        " ORDER BY id"
    )
    assert [json.loads(d["payload"])["attempt"] for d in dispatches] == [1, 2]
    # not due yet: a worker that receives it early is told when to come back
    early = await client.lock(job.id)
    assert early.outcome in (epb.LOCK_OUTCOME_NOT_DUE, epb.LOCK_OUTCOME_LOCKED)


async def test_fatal_failure_fails_with_a_public_message_free_of_internals(
    client: Client,
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job

    answer = await client.executor.SubmitFailure(
        failure(job.id, lease.lease_token, "JOB_REJECTED", "Traceback: /srv/secret.py line 3")
    )

    assert answer.status == job_pb2.JOB_STATUS_FAILED
    view = await client.get(job.id)
    assert view.status == job_pb2.JOB_STATUS_FAILED
    assert view.error_code == "JOB_REJECTED"
    assert view.error_message and "secret" not in view.error_message
    assert "Traceback" not in str(view)


async def test_attempts_exhausted_fail_the_job(client: Client) -> None:
    job = (await client.create()).job  # the synthetic definition allows 4 attempts

    async def locked() -> epb.LockJobResponse | None:
        answer = await client.lock(job.id)
        return answer if answer.outcome == epb.LOCK_OUTCOME_LOCKED else None

    for attempt in range(1, 5):
        lease = await eventually(locked, message="the retry never became due", timeout=15)
        assert lease.job.attempt == attempt
        answer = await client.executor.SubmitFailure(
            failure(job.id, lease.job.lease_token, "PROVIDER_TIMEOUT")
        )

    assert answer.status == job_pb2.JOB_STATUS_FAILED
    assert (await client.get(job.id)).attempt_count == 4


async def test_a_job_keeps_the_attempt_budget_it_was_created_with(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    await db.execute("UPDATE jobs SET max_attempts = 1")
    lease = (await client.lock(job.id)).job

    answer = await client.executor.SubmitFailure(
        failure(job.id, lease.lease_token, "PROVIDER_TIMEOUT")
    )

    assert answer.status == job_pb2.JOB_STATUS_FAILED


async def test_a_handed_back_job_is_retried_at_once_without_spending_an_attempt(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job

    answer = await client.executor.SubmitFailure(
        failure(job.id, lease.lease_token, "WORKER_SHUTDOWN")
    )

    assert answer.status == job_pb2.JOB_STATUS_RETRYING
    assert await db.fetchval("SELECT attempt_count FROM jobs") == 0
    again = await client.lock(job.id)
    assert (again.outcome, again.job.attempt) == (epb.LOCK_OUTCOME_LOCKED, 1)


async def test_an_expired_lease_is_reaped_and_the_job_dispatched_again(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    dead_worker = (await client.lock(job.id)).job

    await eventually(
        lambda: db.fetchval(
            "SELECT count(*) FROM outbox_events WHERE event_type = 'job.dispatch'"
            " AND status = 'published'"
        ),
        timeout=10,
    )
    reaped = await eventually(
        lambda: db.fetchrow("SELECT status, error_code FROM jobs WHERE status <> 'running'"),
        timeout=10,
        message="the lease was not reaped",
    )

    assert tuple(reaped) == ("retrying", "LEASE_EXPIRED")
    await eventually(
        lambda: db.fetchval(
            "SELECT count(*) = 2 FROM outbox_events WHERE event_type = 'job.dispatch'"
            " AND status = 'published'"
        ),
        message="the retry was not dispatched",
    )
    await db.execute("UPDATE jobs SET next_run_at = now()")
    assert (await client.lock(job.id, "worker-b")).job.attempt == 2
    _, error = await raised_error(
        client.executor.SubmitResult(result(job.id, dead_worker.lease_token))
    )
    assert isinstance(error, LeaseLost)


async def test_cancel_of_a_queued_job_is_immediate(client: Client) -> None:
    job = (await client.create()).job

    cancelled = await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))

    assert cancelled.job.status == job_pb2.JOB_STATUS_CANCELLED
    assert (await client.lock(job.id)).outcome == epb.LOCK_OUTCOME_UNAVAILABLE
    _, error = await raised_error(
        client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))
    )
    assert isinstance(error, JobAlreadyCancelled)


async def test_cancel_of_a_running_job_tells_its_worker_at_once(
    client: Client, nats_client: NatsClient
) -> None:
    notices: asyncio.Queue[bytes] = asyncio.Queue()

    async def on_notice(msg) -> None:  # type: ignore[no-untyped-def]
        await notices.put(msg.data)

    await nats_client.subscribe(CANCEL_SUBJECT, cb=on_notice)
    await nats_client.flush()
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job

    answer = await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))

    assert answer.job.status == job_pb2.JOB_STATUS_CANCEL_REQUESTED
    assert json.loads(await asyncio.wait_for(notices.get(), 2)) == {"job_id": job.id}
    beat = await client.executor.Heartbeat(
        epb.HeartbeatRequest(job_id=job.id, lease_token=lease.lease_token, progress=-1)
    )
    assert beat.cancel_requested
    confirmed = await client.executor.SubmitFailure(failure(job.id, lease.lease_token, "CANCELLED"))
    assert confirmed.status == job_pb2.JOB_STATUS_CANCELLED
    assert (await client.get(job.id)).status == job_pb2.JOB_STATUS_CANCELLED


async def test_a_result_that_loses_the_race_with_cancel_is_dropped(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))

    answer = await client.executor.SubmitResult(result(job.id, lease.lease_token))

    assert answer.status == job_pb2.JOB_STATUS_CANCELLED
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 0


async def test_finished_jobs_cannot_be_cancelled(client: Client) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job
    await client.executor.SubmitResult(result(job.id, lease.lease_token))

    code, error = await raised_error(
        client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))
    )

    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert isinstance(error, JobNotCancellable)


async def test_another_users_job_is_not_found(client: Client) -> None:
    job = (await client.create(user_id="alice")).job

    for call in (
        client.jobs.GetJob(jpb.GetJobRequest(job_id=job.id, user_id="mallory")),
        client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="mallory")),
    ):
        code, error = await raised_error(call)
        assert code == grpc.StatusCode.NOT_FOUND
        assert isinstance(error, JobNotFound)
    assert (await client.get(job.id, "alice")).status == job_pb2.JOB_STATUS_QUEUED


async def test_a_cancel_pending_when_the_worker_vanishes_ends_cancelled(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    await client.lock(job.id)
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))

    row = await eventually(
        lambda: db.fetchrow("SELECT status, error_code FROM jobs WHERE status = 'cancelled'"),
        message="the reaper did not end the abandoned cancel",
    )

    assert row["error_code"] == "CANCELLED"
    assert (
        await db.fetchval("SELECT count(*) FROM outbox_events WHERE event_type = 'job.cancelled'")
        == 1
    )


@pytest.mark.parametrize("code", ["", "provider_timeout", "A" * 101, "PROVIDER TIMEOUT"])
async def test_a_malformed_error_code_is_refused_and_changes_nothing(
    client: Client, db: asyncpg.Connection, code: str
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job
    before = dict(await db.fetchrow("SELECT * FROM jobs"))

    status, error = await raised_error(
        client.executor.SubmitFailure(failure(job.id, lease.lease_token, code))
    )

    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error.violations] == ["error_code"]
    assert dict(await db.fetchrow("SELECT * FROM jobs")) == before


@pytest.mark.parametrize(
    ("artifact_type", "artifact_id"), [("t" * 65, "a"), ("t", "i" * 256), ("", "a"), ("t", "")]
)
async def test_an_artifact_too_long_for_its_column_is_refused_with_nothing_written(
    client: Client, db: asyncpg.Connection, artifact_type: str, artifact_id: str
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job
    request = result(job.id, lease.lease_token)
    request.artifacts[0].artifact_type = artifact_type
    request.artifacts[0].artifact_id = artifact_id

    status, error = await raised_error(client.executor.SubmitResult(request))

    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error.violations] == ["artifacts"]
    assert await db.fetchval("SELECT status FROM jobs") == "running"
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 0


async def test_a_failure_report_with_a_nul_character_is_kept_readable(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job

    answer = await client.executor.SubmitFailure(
        failure(job.id, lease.lease_token, "PROVIDER_TIMEOUT", "bad\x00byte")
    )

    assert answer.status == job_pb2.JOB_STATUS_RETRYING
    assert await db.fetchval("SELECT internal_error_message FROM jobs") == "bad\ufffdbyte"
