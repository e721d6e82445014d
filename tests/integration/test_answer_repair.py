"""One repair path for every invalid model answer (issue 25): a worker on the local
OpenAI-compatible server runs a Feynman evaluation whose first answer is not what the
prompt asked for. Whether it is prose, JSON that is not an object, or an object off the
output schema, the job's pipeline makes exactly one repair call (the prompt, the rejected
answer, what was wrong) and the job succeeds in its first attempt; the provider's request
log shows both calls, and the job's usage both."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from devstack.openai_server import LocalOpenAIServer, Reply, completion
from shared.pb.jobs.v1 import job_pb2
from tests.support.ai import FEYNMAN_INPUT
from tests.support.stack import Client, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp
from worker_service.model_router import ModelSettings

S = job_pb2


@pytest.fixture
async def openai_server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer() as server:
        yield server


@pytest.fixture
async def worker(
    nats_url: str, target: str, openai_server: LocalOpenAIServer
) -> AsyncIterator[WorkerApp]:
    """The primary tier (Feynman evaluations) on the local server; the review-card child
    runs on the fake provider, so the server sees the parent's calls only."""
    models = ModelSettings(
        model_primary_provider="openai",
        model_primary_base_url=openai_server.url,
        model_primary_model="repair-model",
    )
    async with WorkerApp(worker_settings(nats_url, target), models=models) as app:
        yield app


@pytest.mark.parametrize(
    ("first_answer", "code"),
    [
        ("Sure! The learner explained photosynthesis quite well.", "VALIDATION_OUTPUT_MALFORMED"),
        ("[1, 2, 3]", "VALIDATION_OUTPUT_MALFORMED"),
        ('{"score": 101, "summary": "too good"}', "VALIDATION_OUTPUT_SCHEMA"),
    ],
    ids=["prose", "json-array", "off-schema"],
)
async def test_an_invalid_first_answer_gets_one_repair_call_and_the_job_succeeds_at_once(
    client: Client,
    db: asyncpg.Connection,
    worker: WorkerApp,
    openai_server: LocalOpenAIServer,
    first_answer: str,
    code: str,
) -> None:
    openai_server.script(Reply(body=completion(first_answer, "repair-model")))
    job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job

    async def finished() -> object:
        seen = await client.get(job.id)
        return seen if seen.status in (S.JOB_STATUS_SUCCEEDED, S.JOB_STATUS_FAILED) else None

    done = await eventually(finished, timeout=30, message="the job did not finish")

    assert done.status == S.JOB_STATUS_SUCCEEDED
    assert done.attempt_count == 1  # repaired within the attempt, not retried
    first, repair = (r.body["messages"] for r in openai_server.requests)
    assert len(openai_server.requests) == 2  # the answer, then exactly one repair
    assert repair[: len(first)] == first
    rejected, instruction = repair[len(first) :]
    assert (rejected["role"], rejected["content"]) == ("assistant", first_answer)
    assert instruction["role"] == "user" and code in instruction["content"]
    calls = await db.fetchval(
        "SELECT count(*) FROM usage_logs WHERE job_id = $1 AND NOT reused", job.id
    )
    assert calls == 2
