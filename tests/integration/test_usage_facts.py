"""Every provider call is billed (seed 000 §5.7): usage is a fact, not a result. A worker
reports the calls of an attempt it no longer holds (ReportUsage, named by the attempt's
lease token), each call stored once by its call id; an attempt reaped without its usage is
marked unknown, in GetJob and in a metric, until a late report fills it in."""

from __future__ import annotations

import uuid

import asyncpg
import grpc
import pytest
from prometheus_client import REGISTRY

from shared.errors import InvalidInput, LeaseLost
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.rpc_errors import error_from_rpc
from tests.support.ai import FEYNMAN_INPUT
from tests.support.stack import Client, result_request
from tests.support.wait import eventually


def call(call_id: str, cost: float = 0.002, tokens: int = 100) -> epb.ProviderUsage:
    return epb.ProviderUsage(
        provider="fake",
        model="fake-primary",
        credential_mode="platform",
        input_tokens=tokens,
        output_tokens=tokens // 2,
        cost_usd=cost,
        latency_ms=10,
        call_id=call_id,
    )


def report(job_id: str, token: str, *calls: epb.ProviderUsage) -> epb.ReportUsageRequest:
    return epb.ReportUsageRequest(job_id=job_id, lease_token=token, usage=list(calls))


def unknown_metric() -> float:
    value = REGISTRY.get_sample_value(
        "jobs_attempts_usage_unknown_total", {"job_type": "feynman_evaluation"}
    )
    return value or 0.0


async def reaped_attempt(client: Client, db: asyncpg.Connection) -> tuple[str, str]:
    """An AI job whose first attempt's worker vanished: (job id, that attempt's token)."""
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    token = (await client.lock(job.id)).job.lease_token
    await db.execute(
        "UPDATE jobs SET lock_until = now() - interval '1 second' WHERE id = $1", job.id
    )
    await eventually(
        lambda: db.fetchval("SELECT status = 'retrying' FROM jobs WHERE id = $1", job.id),
        timeout=10,
        message="the lease was not reaped",
    )
    return job.id, token


async def test_a_reaped_ai_attempt_is_marked_as_having_unknown_usage(
    client: Client, db: asyncpg.Connection
) -> None:
    before = unknown_metric()

    job_id, _ = await reaped_attempt(client, db)

    assert (await client.get(job_id)).usage_unknown_attempts == 1
    assert unknown_metric() == before + 1
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == 0


async def test_usage_of_an_attempt_that_lost_its_lease_is_recorded_and_billed(
    client: Client, db: asyncpg.Connection
) -> None:
    job_id, token = await reaped_attempt(client, db)
    # another worker runs the next attempt meanwhile
    await db.execute("UPDATE jobs SET next_run_at = now() WHERE id = $1", job_id)
    assert (await client.lock(job_id)).job.attempt == 2

    answer = await client.executor.ReportUsage(
        report(job_id, token, call(str(uuid.uuid4())), call(str(uuid.uuid4()), cost=0.001))
    )

    assert (answer.attempt, answer.recorded) == (1, 2)
    rows = await db.fetch("SELECT attempt, cost_usd FROM usage_logs WHERE job_id = $1", job_id)
    assert sorted((r["attempt"], float(r["cost_usd"])) for r in rows) == [(1, 0.001), (1, 0.002)]
    job = await client.get(job_id)
    assert job.total_cost_usd == pytest.approx(0.003)
    assert job.total_cost_usd_decimal == "0.003000"  # exact, as the rows hold it
    assert job.usage_unknown_attempts == 0  # the late report filled it in


async def test_a_usage_report_is_never_applied_twice(
    client: Client, db: asyncpg.Connection
) -> None:
    job_id, token = await reaped_attempt(client, db)
    calls = [call(str(uuid.uuid4())), call(str(uuid.uuid4()))]

    first = await client.executor.ReportUsage(report(job_id, token, *calls))
    again = await client.executor.ReportUsage(report(job_id, token, *calls))

    assert (first.recorded, again.recorded) == (2, 0)
    assert await db.fetchval("SELECT count(*) FROM usage_logs WHERE job_id = $1", job_id) == 2


async def test_a_call_submitted_with_a_failure_and_reported_again_is_stored_once(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    token = (await client.lock(job.id)).job.lease_token
    billed = call(str(uuid.uuid4()))
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id,
            lease_token=token,
            error_code="PROVIDER_UNAVAILABLE",
            error_message="503",
            usage=[billed],
        )
    )

    answer = await client.executor.ReportUsage(report(job.id, token, billed))

    assert answer.recorded == 0
    assert await db.fetchval("SELECT count(*) FROM usage_logs WHERE job_id = $1", job.id) == 1


async def test_report_usage_with_a_token_of_no_attempt_is_lease_lost(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    await client.lock(job.id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.executor.ReportUsage(
            report(job.id, str(uuid.uuid4()), call(str(uuid.uuid4())))
        )

    assert raised.value.code() is grpc.StatusCode.ABORTED
    assert isinstance(error_from_rpc(raised.value), LeaseLost)
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == 0


async def test_report_usage_needs_a_call_id_on_every_record(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    token = (await client.lock(job.id)).job.lease_token

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.executor.ReportUsage(report(job.id, token, call("")))

    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(error_from_rpc(raised.value), InvalidInput)
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == 0


async def test_an_attempt_that_reported_its_usage_before_the_reaper_is_not_unknown(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    token = (await client.lock(job.id)).job.lease_token
    await client.executor.ReportUsage(report(job.id, token, call(str(uuid.uuid4()))))
    before = unknown_metric()

    await db.execute(
        "UPDATE jobs SET lock_until = now() - interval '1 second' WHERE id = $1", job.id
    )
    await eventually(
        lambda: db.fetchval("SELECT status = 'retrying' FROM jobs WHERE id = $1", job.id),
        timeout=10,
        message="the lease was not reaped",
    )

    assert (await client.get(job.id)).usage_unknown_attempts == 0
    assert unknown_metric() == before


async def test_a_result_a_cancel_won_against_still_bills_its_provider_calls(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    lease = (await client.lock(job.id)).job
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))
    submitted = result_request(job.id, lease.lease_token, {"attempt": 1, "data": "late"})
    submitted.usage.append(call(str(uuid.uuid4())))

    answer = await client.executor.SubmitResult(submitted)

    assert answer.status == job_pb2.JOB_STATUS_CANCELLED  # the result is dropped ...
    rows = await db.fetch("SELECT attempt, cost_usd FROM usage_logs WHERE job_id = $1", job.id)
    assert [(r["attempt"], float(r["cost_usd"])) for r in rows] == [(1, 0.002)]  # ... not its bill
