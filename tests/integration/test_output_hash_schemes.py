"""SubmitResult during the move to RFC 8785 output hashes (docs/api.md, "The output hash"): the
job service accepts a result hashed either way, stores the hash as sent (its scheme with
it), answers a repeat of either kind as the success it was, and refuses a wrong hash."""

from __future__ import annotations

import asyncpg
import grpc
import pytest

from shared.canonical import content_hash
from shared.output_hash import output_hash
from shared.pb.jobs.v1 import job_pb2
from tests.support.stack import Client, result_request

# a number and a text the two schemes spell differently, in an output of synthetic's schema
OUTPUT = {
    "attempt": 1,
    "data": "naïve",
    "signals": [{"name": "s", "payload": {"ratio": 1e-7}, "received_at": 1e-7}],
}


@pytest.mark.parametrize("scheme", ["jcs", "legacy"])
async def test_a_result_hashed_either_way_is_stored_with_its_scheme_and_repeats_succeed(
    client: Client, db: asyncpg.Connection, scheme: str
) -> None:
    job = (await client.create(sleep_ms=1)).job
    token = (await client.lock(job.id)).job.lease_token
    request = result_request(job.id, token, OUTPUT)
    request.output_hash = output_hash(OUTPUT) if scheme == "jcs" else content_hash(OUTPUT)

    first = await client.executor.SubmitResult(request)
    repeat = await client.executor.SubmitResult(request)  # the answer was lost: sent again

    assert (first.status, repeat.status) == (job_pb2.JOB_STATUS_SUCCEEDED,) * 2
    stored = await db.fetchval("SELECT output_hash FROM jobs WHERE id = $1", job.id)
    assert stored == request.output_hash
    assert stored.startswith("jcs:sha256:") == (scheme == "jcs")
    assert (await client.get(job.id)).output_hash == stored


@pytest.mark.parametrize(
    "wrong",
    [
        output_hash({"attempt": 2}),
        content_hash({"attempt": 2}),
        "jcs:sha256:" + content_hash(OUTPUT),  # the legacy digest under the JCS name
        "sha256:" + content_hash(OUTPUT),
    ],
)
async def test_a_hash_that_is_not_the_outputs_is_refused(
    client: Client, db: asyncpg.Connection, wrong: str
) -> None:
    job = (await client.create(sleep_ms=1)).job
    token = (await client.lock(job.id)).job.lease_token
    request = result_request(job.id, token, OUTPUT)
    request.output_hash = wrong

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.executor.SubmitResult(request)

    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job.id) == "running"
