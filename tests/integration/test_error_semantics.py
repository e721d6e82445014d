"""Error semantics of seed 000 §5.2 as users see them: a provider's refusal of the request
itself (a 4xx other than 401/403/408/429) ends the job at once."""

from __future__ import annotations

import asyncpg

from shared.pb.jobs.v1 import job_pb2
from tests.integration.test_projections import fail_attempt
from tests.support.stack import Client


async def test_a_provider_request_rejected_fails_the_job_without_a_retry(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create()).job

    answer = await fail_attempt(client, job.id, "PROVIDER_REQUEST_REJECTED")

    assert answer.status == job_pb2.JOB_STATUS_FAILED
    row = await db.fetchrow(
        "SELECT status, attempt_count, max_attempts, error_code FROM jobs WHERE id = $1", job.id
    )
    assert (row["status"], row["attempt_count"], row["error_code"]) == (
        "failed",
        1,
        "PROVIDER_REQUEST_REJECTED",
    )
    assert row["max_attempts"] > 1  # attempts were left: the code decided
    viewed = await client.get(job.id)
    assert viewed.status == job_pb2.JOB_STATUS_FAILED
    assert viewed.error_code == "PROVIDER_REQUEST_REJECTED"
