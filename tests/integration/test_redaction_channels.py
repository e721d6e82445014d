"""One redaction rule on every channel (issue 25, ``shared.redaction``), against real
PostgreSQL and NATS: a job type whose definition redacts an output field leaks it through
no channel a user or a worker in another language can reach.

    stored output, GetJob, ListJobs, admin views, logs
                       test_data_lifecycle.py::
                       test_redacted_output_fields_are_never_stored_nor_shown_to_the_owner,
                       and again below after a real worker's run
    partial output     a WatchJob with include_partial_output, a real worker streaming from
                       the local OpenAI-compatible server: no piece, no byte of the field,
                       nothing published on the job's partial-output subject
    recorded steps     RecordStep from a raw gRPC client (not the Python worker): refused,
                       nothing stored

The job type here is the Feynman evaluation's prompt, models and fake answer with its
``summary`` redacted and no projection: artifacts and child inputs are what a job type's
projector publishes from its whole output, its own choice (``shared.redaction``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from devstack.openai_server import LocalOpenAIServer
from job_service.app import JobServiceApp
from jobtypes import feynman_evaluation as feynman
from jobtypes.aijob import ai_job_definition
from shared.ai.provider import ModelTier
from shared.constants import PARTIAL_SUBJECT_PREFIX, Queue
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import Registry, default_registry
from shared.rpc_errors import error_from_rpc
from tests.support.ai import FEYNMAN_INPUT
from tests.support.stack import Client, open_channel, running_job_service, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp
from worker_service.model_router import ModelSettings

REDACTED = "summary"
JOB_TYPE = "private_evaluation"
PRIVATE = ai_job_definition(
    job_type=JOB_TYPE,
    label="A Feynman evaluation whose summary is never stored nor returned",
    domain="testing",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=feynman.FeynmanInput,
    output_model=feynman.FeynmanOutput,
    prompt=feynman.PROMPT,
    model_tier=ModelTier.PRIMARY,
    variables=feynman.variables,
    output_redaction=frozenset({REDACTED}),
    redaction_version="2",
    timeout_s=30.0,
    max_attempts=2,
)


# The shipped Feynman evaluation, projection and review-card child included, with its
# summary redacted: the projection copies the whole output into its result artifact and
# the summary into its child's input.
PROJECTED = dataclasses.replace(
    feynman.DEFINITION,
    job_type="projected_private_evaluation",
    output_redaction=frozenset({REDACTED}),
    redaction_version="2",
)


def redacting_registry() -> Registry:
    """The shipped job types, ``private_evaluation`` and ``projected_private_evaluation``."""
    return Registry([*default_registry(), PRIVATE, PROJECTED])


def the_answer() -> dict[str, Any]:
    """What the local server answers a Feynman evaluation of FEYNMAN_INPUT with."""
    job_input = feynman.FeynmanInput(**FEYNMAN_INPUT)
    assert feynman.PROMPT.fake is not None
    answer: dict[str, Any] = feynman.PROMPT.fake(feynman.variables(job_input))
    return answer


async def every_row_as_text(db: asyncpg.Connection) -> dict[str, list[str]]:
    """Each row of each table as PostgreSQL's text form."""
    tables = await db.fetch(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
    )
    return {
        t["table_name"]: [
            r["row"] for r in await db.fetch(f'SELECT t::text AS row FROM "{t["table_name"]}" t')
        ]
        for t in tables
    }


@pytest.fixture
async def redacting(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    async with running_job_service(database_url, nats_url, redacting_registry()) as app:
        yield app


@pytest.fixture
async def client(redacting: JobServiceApp) -> AsyncIterator[Client]:
    async with open_channel(f"127.0.0.1:{redacting.port}") as channel:
        yield Client(channel)


@pytest.fixture
async def openai_server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer(stream_interval_s=0.02, stream_chunk_chars=8) as server:
        yield server


@pytest.fixture
async def streaming_worker(
    redacting: JobServiceApp, nats_url: str, openai_server: LocalOpenAIServer
) -> AsyncIterator[WorkerApp]:
    """A worker that streams every provider call it may (partial output enabled)."""
    models = ModelSettings(
        model_primary_provider="openai",
        model_primary_base_url=openai_server.url,
        model_primary_model="streaming-model",
        model_primary_api_key="sk-test-primary-0123456789",
    )
    settings = worker_settings(nats_url, f"127.0.0.1:{redacting.port}")
    async with WorkerApp(settings, redacting_registry(), models=models) as app:
        yield app


async def test_watching_a_redacted_job_type_with_partial_output_carries_no_redacted_bytes(
    client: Client,
    streaming_worker: WorkerApp,
    openai_server: LocalOpenAIServer,
    nats_client: NatsClient,
    db: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    published: list[Msg] = []

    async def capture(msg: Msg) -> None:
        published.append(msg)

    await nats_client.subscribe(f"{PARTIAL_SUBJECT_PREFIX}.>", cb=capture)
    await nats_client.flush()
    secret = the_answer()[REDACTED]
    assert len(secret) >= 16  # a field worth looking for
    created = await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="alice", job_type=JOB_TYPE, input=struct_from_dict(FEYNMAN_INPUT)
        )
    )
    job_id = created.job.id
    watch = client.jobs.WatchJob(
        jpb.WatchJobRequest(job_id=job_id, user_id="alice", include_partial_output=True)
    )
    answers: list[jpb.WatchJobResponse] = []
    async with asyncio.timeout(30):
        async for answer in watch:
            answers.append(answer)

    # the job ran on the provider, and its redacted field is the answer's
    final = answers[-1].job
    assert final.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert len(openai_server.requests) == 1
    assert dict_from_struct(final.output)[REDACTED].startswith("sha256:")
    # the stream carried states only, and no byte of the field
    assert [a for a in answers if a.HasField("partial")] == []
    wire = b"".join(a.SerializeToString() for a in answers)
    assert secret.encode() not in wire
    # the worker neither asked the provider for a stream nor published a piece
    assert openai_server.requests[0].body.get("stream") is not True
    await nats_client.flush()
    assert [m.subject for m in published] == []
    # and no other channel of the same run has it: answers, the database, the logs
    listed = await client.jobs.ListJobs(jpb.ListJobsRequest(user_id="alice"))
    admin = await client.admin.GetJob(apb.AdminGetJobRequest(job_id=job_id))
    for seen in (listed, admin):
        assert secret.encode() not in seen.SerializeToString()
    for table, rows in (await every_row_as_text(db)).items():
        assert not [r for r in rows if secret in r], table
    assert secret not in caplog.text


async def test_a_piece_published_for_a_redacted_job_is_not_relayed_to_its_watcher(
    client: Client, nats_client: NatsClient
) -> None:
    """A worker in another language that streams anyway: the job service drops its pieces.
    A job of a type that does not redact, watched alongside, shows the pieces got through."""
    secret = "SECRET-partial-0xC0FFEE"
    redacted = (await client.create("alice", JOB_TYPE, **FEYNMAN_INPUT)).job
    plain = (await client.create("alice", "synthetic", sleep_ms=1)).job
    for job in (redacted, plain):
        await client.lock(job.id)

    async def watch(job_id: str, seen: list[jpb.WatchJobResponse], ready: asyncio.Event) -> None:
        request = jpb.WatchJobRequest(job_id=job_id, user_id="alice", include_partial_output=True)
        async for answer in client.jobs.WatchJob(request):
            seen.append(answer)
            ready.set()

    redacted_seen: list[jpb.WatchJobResponse] = []
    plain_seen: list[jpb.WatchJobResponse] = []
    ready = [asyncio.Event(), asyncio.Event()]
    tasks = [
        asyncio.create_task(watch(redacted.id, redacted_seen, ready[0])),
        asyncio.create_task(watch(plain.id, plain_seen, ready[1])),
    ]
    try:
        async with asyncio.timeout(15):
            await asyncio.gather(*(r.wait() for r in ready))  # both subscribed
            seq = 0
            # one publisher: NATS delivers its messages in order, so once the plain job's
            # piece after the redacted one's arrived, the redacted one reached the service
            while not any(a.HasField("partial") for a in plain_seen):
                seq += 1
                for job_id in (redacted.id, plain.id):
                    piece = jpb.PartialOutput(
                        attempt=1, call=1, seq=seq, offset=0, text=f"{secret} {seq}"
                    )
                    await nats_client.publish(
                        f"{PARTIAL_SUBJECT_PREFIX}.{job_id}", piece.SerializeToString()
                    )
                await nats_client.flush()
                await asyncio.sleep(0.05)  # publishing again until the service has subscribed
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    assert any(a.HasField("partial") for a in plain_seen)
    assert [a for a in redacted_seen if a.HasField("partial")] == []
    assert secret.encode() not in b"".join(a.SerializeToString() for a in redacted_seen)


async def test_record_step_from_a_raw_client_is_refused_for_a_redacted_job_type(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await client.create("alice", JOB_TYPE, **FEYNMAN_INPUT)).job
    token = (await client.lock(job.id)).job.lease_token
    answer = json.dumps({**the_answer(), REDACTED: "SECRET-step-0xC0FFEE"})
    request = epb.RecordStepRequest(
        job_id=job.id,
        lease_token=token,
        step="answer",
        response=epb.StepResponse(
            text=answer, parsed_json=answer, model="gpt-x", provider="openai"
        ),
        usage=epb.ProviderUsage(
            provider="openai",
            model="gpt-x",
            credential_mode="platform",
            input_tokens=10,
            output_tokens=5,
            call_id="3f1c9a52-8d0e-4a4b-9f57-0a1c2b3d4e5f",
        ),
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.executor.RecordStep(request)

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = error_from_rpc(raised.value)
    assert "redacts" in error.message and "SECRET" not in error.message
    assert await db.fetchval("SELECT count(*) FROM job_steps") == 0
    # the lease still holds: the attempt goes on, it just has no checkpoint
    assert (await client.get(job.id, "alice")).status == job_pb2.JOB_STATUS_RUNNING


async def test_a_redacted_field_copied_by_the_projection_is_stored_nowhere(
    client: Client, streaming_worker: WorkerApp, db: asyncpg.Connection
) -> None:
    """The Feynman projection copies the summary into its result artifact (which GetJob
    returns) and its review-card child's input: neither keeps it, nor anything else."""
    secret = the_answer()[REDACTED]
    created = await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="alice", job_type=PROJECTED.job_type, input=struct_from_dict(FEYNMAN_INPUT)
        )
    )
    job_id = created.job.id
    got = await eventually(
        lambda: _finished_with_child(client, job_id), timeout=60, message="no finished parent"
    )
    [result] = [a for a in got.job.artifacts if a.artifact_type == "feynman_result"]
    assert dict_from_struct(result.payload)[REDACTED].startswith("sha256:")
    assert secret.encode() not in got.SerializeToString()
    for table, rows in (await every_row_as_text(db)).items():
        assert not [r for r in rows if secret in r], table


async def _finished_with_child(client: Client, job_id: str) -> jpb.GetJobResponse | None:
    got = await client.jobs.GetJob(jpb.GetJobRequest(job_id=job_id, user_id="alice"))
    done = got.job.status == job_pb2.JOB_STATUS_SUCCEEDED and got.job.child_job_ids
    return got if done else None
