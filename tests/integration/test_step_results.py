"""Durable steps' outcomes (issue 45) against the real job service and PostgreSQL:
RecordStepResult stores a step's outcome fenced by the lease, sealed at rest under its
owner's key; the first outcome at an ordinal stays (a repeat reads it back); the next
attempt receives the outcomes, opened, with its lease."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest

from job_service.app import JobServiceApp
from shared.errors import LeaseLost
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.rpc_errors import error_from_rpc
from tests.integration.test_payload_encryption import TEST_DATA_KEK
from tests.integration.test_step_checkpoints import retry_now
from tests.support.stack import Client, open_channel, running_job_service

MARKER = "zqxstepmarker93b1"


@pytest.fixture
async def client(database_url: str, nats_url: str) -> AsyncIterator[Client]:
    async with running_job_service(database_url, nats_url, data_kek=TEST_DATA_KEK) as app:
        assert isinstance(app, JobServiceApp)
        async with open_channel(f"127.0.0.1:{app.port}") as channel:
            yield Client(channel)


def outcome_request(
    job_id: str, token: str, ordinal: int, name: str, result: object
) -> epb.RecordStepResultRequest:
    return epb.RecordStepResultRequest(
        job_id=job_id,
        lease_token=token,
        ordinal=ordinal,
        name=name,
        outcome=epb.StepOutcome(result_json=json.dumps(result)),
    )


async def test_an_outcome_is_sealed_kept_first_and_handed_to_the_next_attempt(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    token = (await client.lock(job.id)).job.lease_token

    first = await client.executor.RecordStepResult(
        outcome_request(job.id, token, 0, "charge", {"receipt": MARKER})
    )
    assert first.recorded
    declined = epb.RecordStepResultRequest(
        job_id=job.id,
        lease_token=token,
        ordinal=1,
        name="notify",
        outcome=epb.StepOutcome(error=epb.StepError(code="JOB_REJECTED", message=MARKER)),
    )
    assert (await client.executor.RecordStepResult(declined)).recorded
    # a repeat at ordinal 0, whatever it says, reads the first outcome back
    again = await client.executor.RecordStepResult(
        outcome_request(job.id, token, 0, "refund", {"other": 1})
    )
    assert not again.recorded
    assert (again.stored.name, again.stored.attempt) == ("charge", 1)
    assert json.loads(again.stored.outcome.result_json) == {"receipt": MARKER}

    rows = await db.fetch(
        "SELECT ordinal, name, result, error_code, error_message FROM job_step_results"
        " WHERE job_id = $1 ORDER BY ordinal",
        job.id,
    )
    assert [(r["ordinal"], r["name"], r["error_code"]) for r in rows] == [
        (0, "charge", None),
        (1, "notify", "JOB_REJECTED"),
    ]
    assert rows[0]["result"].startswith("sealed:v1:") and MARKER not in rows[0]["result"]
    assert rows[1]["error_message"].startswith("sealed:v1:") and rows[1]["result"] is None

    await retry_now(db, job.id)
    locked = (await client.lock(job.id)).job
    assert locked.attempt == 2
    results = {r.ordinal: r for r in locked.step_results}
    assert sorted(results) == [0, 1]
    assert json.loads(results[0].outcome.result_json) == {"receipt": MARKER}
    assert results[1].outcome.error.code == "JOB_REJECTED"
    assert results[1].outcome.error.message == MARKER
    assert (results[0].name, results[0].attempt) == ("charge", 1)

    # the owner sees what the job did — each step's place, name, attempt and a job error's
    # code — and no value
    shown = await client.get(job.id)
    assert shown.steps_total == 2
    assert [(st.ordinal, st.name, st.attempt, st.error_code) for st in shown.steps] == [
        (0, "charge", 1, ""),
        (1, "notify", 1, "JOB_REJECTED"),
    ]
    assert all(st.HasField("recorded_at") for st in shown.steps)
    assert MARKER not in str(shown)


async def test_a_stale_or_unknown_lease_records_nothing(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job
    stale = (await client.lock(job.id)).job.lease_token
    await retry_now(db, job.id)
    await client.lock(job.id)

    for token in (stale, str(uuid.uuid4())):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client.executor.RecordStepResult(outcome_request(job.id, token, 0, "charge", 1))
        assert raised.value.code() is grpc.StatusCode.ABORTED
        assert isinstance(error_from_rpc(raised.value), LeaseLost)
    assert await db.fetchval("SELECT count(*) FROM job_step_results") == 0
