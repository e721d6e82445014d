"""LockJobs and SubmitResults: many jobs per call, each answered on its own."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc
import pytest

from shared.canonical import content_hash
from shared.errors import InvalidInput, LeaseLost
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc, error_from_status
from tests.support.stack import Client, result_request


def lock_batch(job_ids: list[str], worker_id: str = "batcher") -> epb.LockJobsRequest:
    return epb.LockJobsRequest(
        requests=[epb.LockJobRequest(job_id=j, worker_id=worker_id) for j in job_ids]
    )


def result(job_id: str, token: str, n: int) -> epb.SubmitResultRequest:
    return result_request(job_id, token, {"attempt": 1, "data": str(n)}, {"n": n})


async def test_lock_jobs_answers_each_job_in_order(client: Client, db: asyncpg.Connection) -> None:
    queued = (await client.create()).job.id
    taken = (await client.create()).job.id
    await client.lock(taken, "someone-else")
    later = (await client.create()).job.id
    lease = (await client.lock(later)).job
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=later, lease_token=lease.lease_token, error_code="PROVIDER_TIMEOUT"
        )
    )
    await db.execute("UPDATE jobs SET next_run_at = now() + interval '1 hour' WHERE id = $1", later)

    answer = await client.executor.LockJobs(
        lock_batch([queued, taken, later, "not-a-uuid", queued])
    )

    assert [r.outcome for r in answer.responses] == [
        epb.LOCK_OUTCOME_LOCKED,
        epb.LOCK_OUTCOME_UNAVAILABLE,
        epb.LOCK_OUTCOME_NOT_DUE,
        epb.LOCK_OUTCOME_UNAVAILABLE,
        epb.LOCK_OUTCOME_UNAVAILABLE,  # a repeated id is never granted twice
    ]
    assert answer.responses[0].job.job_id == queued
    assert answer.responses[2].retry_after.seconds > 0
    locked_by = await db.fetchval("SELECT locked_by FROM jobs WHERE id = $1", queued)
    assert locked_by == "batcher"


@pytest.mark.parametrize(
    "request_",
    [
        epb.LockJobsRequest(),
        lock_batch(["00000000-0000-0000-0000-000000000000"] * 257),
        epb.LockJobsRequest(
            requests=[
                epb.LockJobRequest(job_id="00000000-0000-0000-0000-000000000000", worker_id=w)
                for w in ("a", "b")
            ]
        ),
    ],
    ids=["empty", "too-many", "two-workers"],
)
async def test_malformed_lock_batches_are_refused(
    client: Client, request_: epb.LockJobsRequest
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.executor.LockJobs(request_)

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(error_from_rpc(raised.value), InvalidInput)


async def test_concurrent_batches_never_grant_a_job_twice(
    client: Client, db: asyncpg.Connection
) -> None:
    job_ids = [(await client.create()).job.id for _ in range(60)]

    answers = await asyncio.gather(
        *(
            client.executor.LockJobs(
                lock_batch(list(reversed(job_ids)) if i % 2 else job_ids, f"worker-{i}")
            )
            for i in range(4)
        )
    )

    granted = [r.job.job_id for a in answers for r in a.responses if r.job.job_id]
    assert sorted(granted) == sorted(job_ids)
    assert await db.fetchval("SELECT count(*) FROM job_events WHERE to_status = 'running'") == 60


async def test_submit_results_commits_each_and_refuses_a_stale_one_alone(
    client: Client, db: asyncpg.Connection
) -> None:
    job_ids = [(await client.create()).job.id for _ in range(3)]
    locked = await client.executor.LockJobs(lock_batch(job_ids))
    tokens = [r.job.lease_token for r in locked.responses]
    stale = "00000000-0000-0000-0000-000000000000"

    answer = await client.executor.SubmitResults(
        epb.SubmitResultsRequest(
            requests=[
                result(job_ids[0], tokens[0], 0),
                result(job_ids[1], stale, 1),
                result(job_ids[2], tokens[2], 2),
            ]
        )
    )

    first, refused, last = answer.outcomes
    assert first.status == last.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert refused.HasField("error") is not False
    assert refused.error.code == grpc.StatusCode.ABORTED.value[0]
    assert isinstance(error_from_status(refused.error), LeaseLost)
    statuses = dict(await db.fetch("SELECT id::text, status FROM jobs"))
    assert [statuses[j] for j in job_ids] == ["succeeded", "running", "succeeded"]
    artifacts = await db.fetch("SELECT job_id::text, payload FROM job_artifacts ORDER BY id")
    assert sorted(a["job_id"] for a in artifacts) == sorted([job_ids[0], job_ids[2]])
    domain_events = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE event_type = 'job.succeeded'"
    )
    assert domain_events == 2


async def test_a_repeated_batch_submit_is_idempotent(
    client: Client, db: asyncpg.Connection
) -> None:
    job_id = (await client.create()).job.id
    token = (await client.lock(job_id)).job.lease_token
    request = epb.SubmitResultsRequest(requests=[result(job_id, token, 7)])

    first = await client.executor.SubmitResults(request)
    again = await client.executor.SubmitResults(request)

    assert first.outcomes[0].status == again.outcomes[0].status == job_pb2.JOB_STATUS_SUCCEEDED
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 1


@pytest.mark.parametrize(
    ("output", "artifact_payload", "field"),
    [
        ({"score": float("nan")}, {"n": 1}, "output"),
        ({"text": "a\x00b"}, {"n": 1}, "output"),
        ({"text": "ok"}, {"note": "a\x00b"}, "artifacts"),
    ],
)
async def test_a_result_jsonb_cannot_store_is_refused_alone(
    client: Client, db: asyncpg.Connection, output: dict, artifact_payload: dict, field: str
) -> None:
    job_ids = [(await client.create()).job.id for _ in range(2)]
    locked = await client.executor.LockJobs(lock_batch(job_ids))
    tokens = [r.job.lease_token for r in locked.responses]
    bad = epb.SubmitResultRequest(
        job_id=job_ids[0],
        lease_token=tokens[0],
        output=struct_from_dict(output),
        output_hash="0" * 64,
        artifacts=[
            job_pb2.Artifact(
                artifact_type="t", artifact_id="a", payload=struct_from_dict(artifact_payload)
            )
        ],
    )
    if field == "artifacts":  # a valid output, so that only the artifact is wrong
        bad.output_hash = content_hash(output)

    answer = await client.executor.SubmitResults(
        epb.SubmitResultsRequest(requests=[bad, result(job_ids[1], tokens[1], 1)])
    )

    refused, accepted = answer.outcomes
    error = error_from_status(refused.error)
    assert isinstance(error, InvalidInput)
    assert [v.field for v in error.violations] == [field]
    assert accepted.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job_ids[0]) == "running"
