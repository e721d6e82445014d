"""Real PostgreSQL and NATS JetStream for the whole suite — no mocks of either.

PostgreSQL: one server per session (``JOBS_DATABASE_URL`` when set, else an embedded one),
one migrated template database per session, and a fresh ``CREATE DATABASE … TEMPLATE``
copy per test (tens of milliseconds, so tests never share rows).

NATS: a private ``nats-server -js`` per test (it starts in ~10 ms, so isolation costs
nothing); ``nats_url`` uses ``JOBS_NATS_URL`` instead when set, after deleting its streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NatsClient

from devstack.embedded import (
    EmbeddedNats,
    EmbeddedPostgres,
    create_database,
    drop_database,
    with_database,
)
from job_service.app import JobServiceApp
from tests.support.nats import delete_all_streams
from tests.support.stack import Client, open_channel, running_job_service

TEMPLATE_DATABASE = "jobs_template"
# Test data is disposable: skip the disk flushes that make durable commits slow.
TEST_PG_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
# The test server's data in memory where the machine has a tmpfs there: every test copies
# the template into a database of its own, 0.02 s on tmpfs against 0.2-0.5 s on this
# machine's disk, over a thousand times a run (a test server's data is thrown away anyway).
MEMORY_DIR = Path("/dev/shm")


@contextlib.contextmanager
def _postgres_dir() -> Iterator[Path]:
    # Not under pytest's basetemp: every pytest session start (another engineer's, a
    # parallel CI job's) resets /tmp/pytest-of-<user> to mode 0700, which would lock the
    # unprivileged PostgreSQL user out of its own data. Short, too: the socket lives there.
    in_memory = MEMORY_DIR.is_dir() and os.access(MEMORY_DIR, os.W_OK)
    root = Path(tempfile.mkdtemp(prefix="jobs-test-pg-", dir=MEMORY_DIR if in_memory else None))
    try:
        yield root / "data"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_data_dir() -> Iterator[Path]:
    """A not-yet-existing directory for a test's own EmbeddedPostgres, removed afterwards."""
    with _postgres_dir() as path:
        yield path


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """URL of a server on which tests may create and drop databases."""
    external = os.environ.get("JOBS_DATABASE_URL")
    if external:
        yield external
        return
    with (
        _postgres_dir() as data_dir,
        EmbeddedPostgres(data_dir, settings=TEST_PG_SETTINGS) as server,
    ):
        yield server.url("postgres")


@pytest.fixture(scope="session")
async def template_database(pg_admin_url: str) -> AsyncIterator[str]:
    """Name of a database migrated to head once per session, to copy per test."""
    from job_service.adapters.postgres.migrations import upgrade

    # Rebuilt every session: a template left on a shared server may predate a migration.
    await drop_database(pg_admin_url, TEMPLATE_DATABASE)
    await create_database(pg_admin_url, TEMPLATE_DATABASE)
    # upgrade() is synchronous and may run its own event loop: keep it off ours.
    await asyncio.to_thread(upgrade, with_database(pg_admin_url, TEMPLATE_DATABASE))
    # CREATE DATABASE … TEMPLATE fails while anyone is connected to the template, so
    # close whatever the migration left open and refuse new connections from now on.
    admin = await asyncpg.connect(pg_admin_url)
    try:
        await admin.execute(f'ALTER DATABASE "{TEMPLATE_DATABASE}" WITH ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            TEMPLATE_DATABASE,
        )
    finally:
        await admin.close()
    yield TEMPLATE_DATABASE
    await drop_database(pg_admin_url, TEMPLATE_DATABASE)


@pytest.fixture
async def database_url(pg_admin_url: str, template_database: str) -> AsyncIterator[str]:
    """URL of a fresh, migrated database of this test's own, dropped afterwards."""
    name = f"jobs_test_{uuid.uuid4().hex[:16]}"
    await create_database(pg_admin_url, name, template=template_database)
    try:
        yield with_database(pg_admin_url, name)
    finally:
        await drop_database(pg_admin_url, name)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[EmbeddedNats]:
    """A private JetStream server for this test; stop/start/kill it to inject faults."""
    with EmbeddedNats(tmp_path / "nats") as server:
        yield server


@pytest.fixture
async def nats_url(request: pytest.FixtureRequest) -> str:
    """URL of an empty JetStream server: JOBS_NATS_URL (streams deleted) or a private one."""
    external = os.environ.get("JOBS_NATS_URL")
    if external:
        await delete_all_streams(external)
        return external
    server: EmbeddedNats = request.getfixturevalue("nats_server")
    return server.url


@pytest.fixture
async def nats_client(nats_url: str) -> AsyncIterator[NatsClient]:
    """A connected client of ``nats_url``, closed after the test."""
    client = await nats.connect(nats_url)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def job_service(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    """job_service in this process, with short leases (tests.support.stack.FAST)."""
    async with running_job_service(database_url, nats_url) as app:
        yield app


@pytest.fixture
def target(job_service: JobServiceApp) -> str:
    """Where ``job_service`` listens."""
    return f"127.0.0.1:{job_service.port}"


@pytest.fixture
async def client(target: str) -> AsyncIterator[Client]:
    async with open_channel(target) as channel:
        yield Client(channel)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to this test's database, to assert on what it holds."""
    conn = await asyncpg.connect(database_url)
    try:
        yield conn
    finally:
        await conn.close()
