"""The fake of ``durable_jobs_client.testing`` answers a few calls as the real client over
a real job_service (PostgreSQL, NATS) does: the same scenario runs against both and what
each saw must agree (created or found again by its idempotency key, a key reused for
other input, a job not found, the end of an id, a cancel and a second one, a signal to a
finished job, the operator's view). The signatures: tests/unit/
test_client_testing_conformance.py."""

from __future__ import annotations

import uuid
from typing import Any

from durable_jobs_client import AsyncJobsClient, JobsError
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.testing import FakeJobService

from tests.support.stack import ALL_ROLES_TOKEN

INPUT = {"sleep_ms": 10}


async def seen(jobs: Any) -> list[Any]:
    """What one client saw of the scenario: answers and refusals, by their meaning."""

    async def refusal(call: Any) -> tuple[str, Any]:
        try:
            await call
        except JobsError as refused:
            return type(refused).__name__, refused.code
        return "answered", None

    key = f"conformance-{uuid.uuid4()}"
    first = await jobs.create("synthetic", INPUT, idempotency_key=key)
    again = await jobs.create("synthetic", INPUT, idempotency_key=key)
    job = first.job
    found = await jobs.get(job.id)
    by_suffix = await jobs.list_page(id_suffix=job.id[-8:], page_size=5)
    cancelled = await jobs.cancel(job.id)
    operator = await jobs.admin.get_job(job.id)
    listed = await jobs.admin.list_jobs(id_suffix=job.id[-12:])
    return [
        (first.created, again.created, again.job.id == job.id),
        (job.status, job.user_id, job.job_type, dict(job.input), job.input_state),
        await refusal(jobs.create("synthetic", {"sleep_ms": 11}, idempotency_key=key)),
        (found.id == job.id, found.status, found.input["sleep_ms"], found.input_state),
        [j.id == job.id for j in by_suffix.jobs],
        await refusal(jobs.get(str(uuid.uuid4()))),
        await refusal(jobs.list_page(id_suffix="xyz")),
        cancelled.status,
        await refusal(jobs.cancel(job.id)),
        await refusal(jobs.signal(job.id, "approve")),
        (operator.id == job.id, operator.status),
        [j.id == job.id for j in listed.jobs],
        await refusal(jobs.admin.get_job(str(uuid.uuid4()))),
    ]


async def test_the_fake_answers_as_the_real_service_does(target: str) -> None:
    async with AsyncJobsClient(target, user_id="user-1", token=ALL_ROLES_TOKEN) as real:
        truth = await seen(real)
    fake = await seen(FakeJobService().client(user_id="user-1"))

    assert truth[1][0] == job_pb2.JOB_STATUS_QUEUED and truth[7] == job_pb2.JOB_STATUS_CANCELLED
    for step, (theirs, ours) in enumerate(zip(truth, fake, strict=True)):
        assert ours == theirs, f"step {step}"
