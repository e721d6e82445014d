from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest

from job_service.app import JobServiceApp
from tests.support.stack import Client, running_job_service


@pytest.fixture
async def job_service(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    async with running_job_service(database_url, nats_url) as app:
        yield app


@pytest.fixture
async def client(job_service: JobServiceApp) -> AsyncIterator[Client]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{job_service.port}") as channel:
        yield Client(channel)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    try:
        yield conn
    finally:
        await conn.close()
