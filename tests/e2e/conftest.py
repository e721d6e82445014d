from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import asyncpg
import grpc
import pytest

from job_service.app import JobServiceApp
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from worker_service.app import WorkerApp
from worker_service.settings import WorkerSettings


@pytest.fixture
async def job_service(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    async with running_job_service(database_url, nats_url) as app:
        yield app


@pytest.fixture
def target(job_service: JobServiceApp) -> str:
    return f"127.0.0.1:{job_service.port}"


@pytest.fixture
async def client(target: str) -> AsyncIterator[Client]:
    async with grpc.aio.insecure_channel(target) as channel:
        yield Client(channel)


@pytest.fixture
async def worker(nats_url: str, target: str) -> AsyncIterator[WorkerApp]:
    """One worker in this process."""
    settings = WorkerSettings(
        nats_url=nats_url, job_service_target=target, worker_id="inproc-worker"
    )
    async with WorkerApp(settings) as app:
        yield app


@pytest.fixture
def spawn_worker(
    tmp_path: Path, nats_url: str, target: str
) -> Iterator[Callable[..., WorkerProcess]]:
    """Starts ``python -m worker_service`` processes; kills leftovers afterwards."""
    started: list[WorkerProcess] = []

    def spawn(worker_id: str, **env: str) -> WorkerProcess:
        process = WorkerProcess(tmp_path, worker_id, nats_url, target, **env)
        started.append(process)
        return process

    yield spawn
    for process in started:
        process.close()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    try:
        yield conn
    finally:
        await conn.close()
