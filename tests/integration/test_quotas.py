"""Per-user limits on CreateJob: unfinished jobs at once (TOO_MANY_JOBS), jobs per UTC day
and the cost of a UTC day's provider calls (QUOTA_EXCEEDED, naming which), all
RESOURCE_EXHAUSTED with RetryInfo, and nothing written."""

from __future__ import annotations

from decimal import Decimal

import asyncpg
import grpc
import pytest
from google.rpc import error_details_pb2

from shared.errors import QuotaExceeded, TooManyJobs
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client, count_rows, open_channel, running_job_service


async def _refusal(client: Client, **kwargs: str) -> tuple[grpc.StatusCode, object]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.create(**kwargs)  # type: ignore[arg-type]
    return raised.value.code(), error_from_rpc(raised.value)


async def test_too_many_unfinished_jobs(database_url: str, nats_url: str) -> None:
    async with (
        running_job_service(database_url, nats_url, max_active_jobs_per_user=2) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        first = (await client.create(key="a")).job
        await client.create(key="b")
        before = await count_rows(database_url)

        code, error = await _refusal(client, key="c")

        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert isinstance(error, TooManyJobs)
        assert error.retry_after_s is not None and error.retry_after_s > 0
        assert await count_rows(database_url) == before
        # a repeat of an existing idempotent create still answers
        again = await client.create(key="a")
        assert (again.created, again.job.id) == (False, first.id)
        # another user is not affected; a finished job frees a slot
        await client.create(user_id="someone-else")
        await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=first.id, user_id="user-1"))
        assert (await client.create(key="c")).created


async def test_the_daily_quota(database_url: str, nats_url: str) -> None:
    async with (
        running_job_service(database_url, nats_url, daily_job_quota_per_user=2) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        job = (await client.create()).job
        await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))
        await client.create()
        before = await count_rows(database_url)

        code, error = await _refusal(client)

        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert isinstance(error, QuotaExceeded)
        # until the next UTC midnight
        assert error.retry_after_s is not None and 0 < error.retry_after_s <= 86_400
        assert await count_rows(database_url) == before
        db = await asyncpg.connect(database_url)
        try:
            counters = await db.fetch("SELECT user_id, created FROM job_quota_usage")
        finally:
            await db.close()
        assert [tuple(r) for r in counters] == [("user-1", 2)]


async def test_limits_of_zero_are_off(database_url: str, nats_url: str) -> None:
    async with (
        running_job_service(
            database_url, nats_url, max_active_jobs_per_user=0, daily_job_quota_per_user=0
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        for _ in range(5):
            assert (await client.create()).created


async def _spend(database_url: str, job_id: str, cost: str, *, days_ago: int = 0) -> None:
    """A provider call of the job, as a worker's usage row records it."""
    db = await asyncpg.connect(database_url)
    try:
        await db.execute(
            "INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode,"
            " cost_usd, created_at) VALUES ($1, 1, 'fake', 'fake-primary', 'platform',"
            " $2::numeric, now() - $3 * interval '1 day')",
            job_id,
            cost,
            days_ago,
        )
    finally:
        await db.close()


async def test_the_daily_cost_budget(database_url: str, nats_url: str) -> None:
    async with (
        running_job_service(
            database_url, nats_url, daily_cost_budget_usd_per_user=Decimal("0.05")
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        first = (await client.create(key="a")).job
        await _spend(database_url, first.id, "0.50", days_ago=1)  # yesterday's: not today's
        await _spend(database_url, first.id, "0.049999")
        assert (await client.create()).created  # under the budget by a millionth
        await _spend(database_url, first.id, "0.000001")
        before = await count_rows(database_url)

        code, error = await _refusal(client)

        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert isinstance(error, QuotaExceeded)
        assert error.metadata["quota"] == "daily_cost_budget"
        assert (error.metadata["budget_usd"], error.metadata["spent_usd"]) == ("0.05", "0.050000")
        assert "daily cost budget" in str(error)
        # until the next UTC midnight
        assert error.retry_after_s is not None and 0 < error.retry_after_s <= 86_400
        assert await count_rows(database_url) == before
        # CreateJobs refuses the user's items alike, and stores the others
        batch = await client.jobs.CreateJobs(
            jpb.CreateJobsRequest(
                requests=[
                    jpb.CreateJobRequest(user_id="user-1", job_type="synthetic"),
                    jpb.CreateJobRequest(user_id="someone-else", job_type="synthetic"),
                ]
            )
        )
        refused, stored = batch.results
        assert refused.HasField("error") and not refused.HasField("response")
        assert refused.error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
        info = error_details_pb2.ErrorInfo()
        assert [d.Unpack(info) for d in refused.error.details if d.Is(info.DESCRIPTOR)]
        assert (info.reason, info.metadata["quota"]) == ("QUOTA_EXCEEDED", "daily_cost_budget")
        assert stored.response.created
        # a repeat of an existing idempotent create still answers
        again = await client.create(key="a")
        assert (again.created, again.job.id) == (False, first.id)


async def test_the_daily_job_quota_names_itself(database_url: str, nats_url: str) -> None:
    async with (
        running_job_service(database_url, nats_url, daily_job_quota_per_user=1) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        await client.create()

        _, error = await _refusal(client)

        assert isinstance(error, QuotaExceeded)
        assert error.metadata["quota"] == "daily_jobs"
