"""AdminService's console sessions and job counts against real PostgreSQL: a session ends
for every caller once closed, idle too long or revoked, belongs to the principal that
opened it, and keeps only a hash; CountJobs says what SQL over the same window says."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import asyncpg
import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from shared.errors import InvalidInput, Unauthenticated
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import admin_service_pb2_grpc, job_pb2
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.rpc_errors import error_from_rpc
from tests.support.stack import ADMIN_TOKEN, ALL_ROLES_TOKEN, Client, open_channel

Admin = admin_service_pb2_grpc.AdminServiceStub


async def _refused(call) -> grpc.aio.AioRpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value


async def test_a_session_is_checked_by_its_principal_until_closed_then_refused_everywhere(
    target: str, db: asyncpg.Connection
) -> None:
    async with open_channel(target, ADMIN_TOKEN) as a, open_channel(target, ADMIN_TOKEN) as b:
        # two channels stand for two console replicas
        first, second = Admin(a), Admin(b)
        opened = await first.OpenConsoleSession(apb.OpenConsoleSessionRequest())
        assert opened.principal == "test-admin"
        ids = apb.CheckConsoleSessionRequest(session_id=opened.session_id)
        assert (await second.CheckConsoleSession(ids)).principal == "test-admin"
        stored = await db.fetchval("SELECT secret_hash FROM console_sessions")
        assert stored == hashlib.sha256(opened.session_id.encode()).hexdigest()

        async with open_channel(target, ALL_ROLES_TOKEN) as other:
            # another principal's token cannot use (or end) it
            stranger = await _refused(Admin(other).CheckConsoleSession(ids))
            assert isinstance(error_from_rpc(stranger), Unauthenticated)
            await Admin(other).CloseConsoleSession(
                apb.CloseConsoleSessionRequest(session_id=opened.session_id)
            )
            await second.CheckConsoleSession(ids)

        await first.CloseConsoleSession(
            apb.CloseConsoleSessionRequest(session_id=opened.session_id)
        )
        ended = await _refused(second.CheckConsoleSession(ids))
        assert ended.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "ended" in (ended.details() or "")


async def test_an_idle_session_ends_and_a_revoke_ends_every_session_of_a_principal(
    target: str, db: asyncpg.Connection
) -> None:
    async with open_channel(target, ADMIN_TOKEN) as channel:
        admin = Admin(channel)
        idle = await admin.OpenConsoleSession(
            apb.OpenConsoleSessionRequest(idle_timeout=Duration(seconds=60))
        )
        # a minute without a check, as the database's clock sees it
        await db.execute("UPDATE console_sessions SET last_seen_at = now() - interval '61 seconds'")
        idled = await _refused(
            admin.CheckConsoleSession(apb.CheckConsoleSessionRequest(session_id=idle.session_id))
        )
        assert idled.code() == grpc.StatusCode.UNAUTHENTICATED

        sessions = [
            await admin.OpenConsoleSession(apb.OpenConsoleSessionRequest()) for _ in range(3)
        ]
        answer = await admin.RevokeConsoleSessions(
            apb.RevokeConsoleSessionsRequest(principal="test-admin")
        )
        assert answer.revoked == 3
        for session in sessions:
            gone = await _refused(
                admin.CheckConsoleSession(
                    apb.CheckConsoleSessionRequest(session_id=session.session_id)
                )
            )
            assert gone.code() == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (apb.OpenConsoleSessionRequest(idle_timeout=Duration(seconds=5)), "idle_timeout"),
        (
            apb.OpenConsoleSessionRequest(
                idle_timeout=Duration(seconds=3600), max_age=Duration(seconds=600)
            ),
            "max_age",
        ),
        (apb.OpenConsoleSessionRequest(max_age=Duration(seconds=2 * 86400)), "max_age"),
    ],
)
async def test_a_session_outside_its_bounds_is_refused_and_nothing_stored(
    target: str, db: asyncpg.Connection, request_: apb.OpenConsoleSessionRequest, field: str
) -> None:
    async with open_channel(target, ADMIN_TOKEN) as channel:
        refused = await _refused(Admin(channel).OpenConsoleSession(request_))
    error = error_from_rpc(refused)
    assert isinstance(error, InvalidInput)
    assert [v.field for v in error.violations] == [field]
    assert await db.fetchval("SELECT count(*) FROM console_sessions") == 0


async def test_job_counts_are_what_sql_counts_over_the_same_window(
    client: Client, db: asyncpg.Connection
) -> None:
    for _ in range(3):
        await client.create(user_id="counted")
    finished = (await client.create(user_id="counted", fail="fatal")).job
    lease = await client.lock(finished.id)
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=finished.id, lease_token=lease.job.lease_token, error_code="JOB_REJECTED"
        )
    )
    await client.jobs.CreateJob(
        jpb.CreateJobRequest(user_id="counted", job_type="synthetic", delay=Duration(seconds=3600))
    )
    # one job created before the window
    await db.execute(
        "UPDATE jobs SET created_at = now() - interval '2 hours'"
        " WHERE id = (SELECT id FROM jobs ORDER BY created_at LIMIT 1)"
    )
    since = datetime.now(UTC) - timedelta(hours=1)
    request = apb.CountJobsRequest(since=Timestamp(seconds=int(since.timestamp())))

    answer = await client.admin.CountJobs(request)

    until = answer.until.ToDatetime(tzinfo=UTC)
    window_start = answer.since.ToDatetime(tzinfo=UTC)
    sql = dict(
        await db.fetch(
            "SELECT status, count(*) FROM jobs WHERE created_at >= $1 AND created_at < $2"
            " GROUP BY status",
            window_start,
            until,
        )
    )
    created = {job_pb2.JobStatus.Name(c.status): c.count for c in answer.created}
    assert {k: v for k, v in created.items() if v} == {
        f"JOB_STATUS_{s.upper()}": n for s, n in sql.items()
    }
    assert len(answer.created) == 8  # every status, zeros included
    finished_counts = {job_pb2.JobStatus.Name(c.status): c.count for c in answer.finished}
    assert finished_counts == {
        "JOB_STATUS_SUCCEEDED": 0,
        "JOB_STATUS_FAILED": 1,
        "JOB_STATUS_CANCELLED": 0,
    }
    unfinished = {job_pb2.JobStatus.Name(c.status): c.count for c in answer.unfinished}
    assert sum(unfinished.values()) == await db.fetchval(
        "SELECT count(*) FROM jobs WHERE finished_at IS NULL"
    )
    assert answer.delayed == 1
