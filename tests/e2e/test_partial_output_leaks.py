"""Partial output is never logged: a ``python -m worker_service`` process at DEBUG streams a
Feynman evaluation from the local OpenAI-compatible server to a WatchJob client (job_service
in this process, at DEBUG too), and no log line of either carries the text."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Callable

import pytest

from devstack.openai_server import LocalOpenAIServer
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.ai import FEYNMAN_INPUT
from tests.support.processes import WorkerProcess
from tests.support.stack import Client


@pytest.fixture
async def openai_server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer(stream_interval_s=0.05, stream_chunk_chars=8) as server:
        yield server


def logged(log: str, pieces: list[str]) -> list[str]:
    """The pieces (those long enough to be text, not punctuation) found in ``log``."""
    return [p for p in pieces if len(p) >= 8 and any(c.isalpha() for c in p) and p in log]


@pytest.mark.slow
async def test_partial_output_reaches_the_watcher_and_no_log(
    client: Client,
    openai_server: LocalOpenAIServer,
    spawn_worker: Callable[..., WorkerProcess],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    worker = spawn_worker(
        "partial-worker",
        JOBS_LOG_LEVEL="DEBUG",
        JOBS_MODEL_PRIMARY_PROVIDER="openai",
        JOBS_MODEL_PRIMARY_BASE_URL=openai_server.url,
        JOBS_MODEL_PRIMARY_MODEL="streaming-model",
        JOBS_MODEL_PRIMARY_API_KEY="sk-test-primary-0123456789",
    )
    created = await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="user-1", job_type="feynman_evaluation", input=struct_from_dict(FEYNMAN_INPUT)
        )
    )
    job_id = created.job.id
    watch = client.jobs.WatchJob(
        jpb.WatchJobRequest(job_id=job_id, user_id="user-1", include_partial_output=True)
    )
    pieces: list[str] = []
    status = 0
    async with asyncio.timeout(60):
        async for answer in watch:
            if answer.HasField("partial"):
                pieces.append(answer.partial.text)
            else:
                status = answer.job.status
    worker.signal(signal.SIGTERM)
    assert await worker.wait(30) == 0

    # the text did stream, and the logs looked at are the real ones
    assert status == job_pb2.JOB_STATUS_SUCCEEDED
    streamed = "".join(s.text for s in openai_server.sent)
    assert pieces and "".join(pieces) == streamed[-len("".join(pieces)) :]
    worker_log = worker.log()
    assert job_id in worker_log and "DEBUG" in worker_log
    assert any(r.name.startswith("job_service") for r in caplog.records)

    chunks = [s.text for s in openai_server.sent]
    for where, text in (
        ("worker", worker_log),
        ("job_service", caplog.text),
        ("output", "".join(capfd.readouterr())),
    ):
        assert streamed not in text, where
        assert logged(text, chunks + pieces) == [], where
