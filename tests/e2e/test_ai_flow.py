"""The reference AI flow end to end — CreateJob(feynman_evaluation) → worker → projection
→ review_card_generation child → worker → cards — on the fake provider and on the real
HTTP provider against the local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import asyncpg
import pytest

from devstack.openai_server import LocalOpenAIServer, Reply
from shared.pb.jobs.v1 import job_pb2
from tests.support.ai import FEYNMAN_INPUT, feynman_flow, review_cards
from tests.support.stack import Client, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp
from worker_service.model_router import ModelSettings

S = job_pb2
PRIMARY_KEY = "sk-primary-platform-key-0123456789"
CHEAP_KEY = "sk-cheap-platform-key-0123456789ab"


def assert_complete_flow(parent: job_pb2.Job, child: job_pb2.Job) -> None:
    assert parent.status == S.JOB_STATUS_SUCCEEDED
    assert child.status == S.JOB_STATUS_SUCCEEDED
    assert child.parent_job_id == parent.id
    cards = review_cards(child)
    weaknesses = list(dict(parent.output)["weaknesses"])
    assert len(cards) == min(3, max(1, len(weaknesses)))
    assert [c.ordinal for c in cards] == list(range(len(cards)))
    assert dict(child.output)["totalCount"] == len(cards)
    assert {a.artifact_type for a in parent.artifacts} >= {"feynman_result"}
    assert parent.total_input_tokens > 0 and child.total_output_tokens > 0


async def test_feynman_flow_on_the_fake_provider(client: Client, worker: WorkerApp) -> None:
    parent, child = await feynman_flow(client)

    assert_complete_flow(parent, child)


@pytest.fixture
async def openai_server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer() as server:
        yield server


def http_models(server: LocalOpenAIServer) -> ModelSettings:
    return ModelSettings(
        model_primary_provider="openai",
        model_primary_base_url=server.url,
        model_cheap_provider="openai",
        model_cheap_base_url=server.url,
    )


async def test_feynman_flow_on_the_local_openai_compatible_server(
    client: Client,
    nats_url: str,
    target: str,
    openai_server: LocalOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    models = ModelSettings(
        model_primary_provider="openai",
        model_primary_base_url=openai_server.url,
        model_primary_model="big-model",
        model_primary_api_key=PRIMARY_KEY,
        model_cheap_provider="openai",
        model_cheap_base_url=openai_server.url,
        model_cheap_model="small-model",
        model_cheap_api_key=CHEAP_KEY,
        model_prices={"big-model": (0.5, 1.5), "small-model": (0.1, 0.2)},
    )
    settings = worker_settings(nats_url, target, worker_id="w-http")
    async with WorkerApp(settings, models=models):
        parent, child = await feynman_flow(client)

    assert_complete_flow(parent, child)
    assert parent.total_cost_usd > 0 and child.total_cost_usd > 0
    seen = [(r.body["model"], r.headers["authorization"]) for r in openai_server.requests]
    assert seen == [("big-model", f"Bearer {PRIMARY_KEY}"), ("small-model", f"Bearer {CHEAP_KEY}")]
    assert FEYNMAN_INPUT["explanation"] in openai_server.requests[0].body["messages"][1]["content"]
    # neither the platform keys nor the job's input reach a log line
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert PRIMARY_KEY not in logged and CHEAP_KEY not in logged
    assert FEYNMAN_INPUT["explanation"] not in logged


async def test_provider_failures_are_retried_and_counted(
    client: Client,
    nats_url: str,
    target: str,
    openai_server: LocalOpenAIServer,
    db: asyncpg.Connection,
) -> None:
    openai_server.script(Reply(status=503), Reply(status=429, headers={"Retry-After": "0"}))
    models = http_models(openai_server)
    settings = worker_settings(nats_url, target, worker_id="w-retry")
    async with WorkerApp(settings, models=models):
        parent, child = await feynman_flow(client, timeout=30)

    assert_complete_flow(parent, child)
    assert parent.attempt_count == 3
    retried = [e.reason for e in parent.events if e.to_status == S.JOB_STATUS_RETRYING]
    assert retried == ["PROVIDER_UNAVAILABLE", "PROVIDER_RATE_LIMITED"]
    calls = await db.fetch(
        "SELECT attempt, error_code FROM usage_logs WHERE job_id = $1 ORDER BY id", parent.id
    )
    assert [tuple(c) for c in calls] == [
        (1, "PROVIDER_UNAVAILABLE"),
        (2, "PROVIDER_RATE_LIMITED"),
        (3, None),
    ]


async def test_cancelling_a_job_abandons_its_provider_call(
    client: Client,
    nats_url: str,
    target: str,
    openai_server: LocalOpenAIServer,
    db: asyncpg.Connection,
) -> None:
    from shared.pb.jobs.v1 import job_service_pb2 as jpb

    openai_server.delay_s = 60.0  # the model never answers in time
    settings = worker_settings(nats_url, target, worker_id="w-cancel")
    async with WorkerApp(settings, models=http_models(openai_server)):
        job = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
        await eventually(lambda: openai_server.requests, timeout=10, message="no provider call")

        await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))

        await asyncio.wait_for(openai_server.disconnected.wait(), 5)

        async def cancelled() -> bool:
            return (await client.get(job.id)).status == S.JOB_STATUS_CANCELLED

        await eventually(cancelled, timeout=10, message="the job was not cancelled")
    row = await db.fetchrow("SELECT error_code, input_tokens FROM usage_logs")
    assert tuple(row) == ("CANCELLED", 0)  # the abandoned call is accounted for


async def test_a_users_own_key_serves_the_parent_and_its_child(
    client: Client,
    nats_url: str,
    target: str,
    openai_server: LocalOpenAIServer,
    db: asyncpg.Connection,
) -> None:
    from shared.pb.jobs.v1 import credential_service_pb2 as cpb
    from shared.pb.jobs.v1 import job_service_pb2 as jpb
    from shared.pbconv import struct_from_dict

    user_key = "sk-users-own-key-7f3a9c0d1e2b4a5c6d"
    stored = await client.credentials.PutCredential(
        cpb.PutCredentialRequest(user_id="user-1", provider="openai", api_key=user_key)
    )
    created = await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="user-1",
            job_type="feynman_evaluation",
            input=struct_from_dict(FEYNMAN_INPUT),
            credential_mode=job_pb2.CREDENTIAL_MODE_USER,
            credential_id=stored.credential.id,
        )
    )
    settings = worker_settings(nats_url, target, worker_id="w-byok")
    async with WorkerApp(settings, models=http_models(openai_server)):
        parent, child = await feynman_flow(client, job_id=created.job.id)

    assert_complete_flow(parent, child)
    assert child.credential_mode == job_pb2.CREDENTIAL_MODE_USER
    assert child.credential_id == stored.credential.id
    assert [r.headers["authorization"] for r in openai_server.requests] == [
        f"Bearer {user_key}",
        f"Bearer {user_key}",
    ]
    modes = await db.fetch("SELECT DISTINCT credential_mode FROM usage_logs")
    assert [r["credential_mode"] for r in modes] == ["user"]
    snapshots = await db.fetchval("SELECT string_agg(payload::text, '') FROM job_snapshots")
    assert user_key not in snapshots and stored.credential.id not in snapshots
