"""The real-server fixtures work: migrated per-test databases, JetStream, durable restarts."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import StreamConfig

from devstack.embedded import EmbeddedNats, EmbeddedPostgres, ensure_database
from tests.support.wait import eventually


async def test_each_test_database_is_migrated(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        tables = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
        current = await conn.fetchval("SELECT current_database()")
    finally:
        await conn.close()
    assert "jobs" in {row["table_name"] for row in tables}
    assert current.startswith("jobs_test_")


async def test_nats_accepts_a_jetstream_publish(nats_client: NatsClient) -> None:
    js = nats_client.jetstream()
    await js.add_stream(StreamConfig(name="PROBE", subjects=["probe.>"]))

    ack = await js.publish("probe.one", b"hello")

    assert (ack.stream, ack.seq) == ("PROBE", 1)
    assert (await js.get_msg("PROBE", 1)).data == b"hello"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_nats_restart_on_the_same_store_keeps_messages(
    nats_server: EmbeddedNats, how: str
) -> None:
    client = await nats.connect(nats_server.url)
    js = client.jetstream()
    await js.add_stream(StreamConfig(name="PROBE", subjects=["probe.>"]))
    await js.publish("probe.one", b"kept")
    await client.close()
    old_pid = nats_server.pid

    nats_server.stop() if how == "stop" else nats_server.kill()
    nats_server.start()

    assert nats_server.pid != old_pid
    client = await nats.connect(nats_server.url)
    try:
        js = client.jetstream()
        info = await js.stream_info("PROBE")
        assert info.state.messages == 1
        assert (await js.get_msg("PROBE", 1)).data == b"kept"
    finally:
        await client.close()


@pytest.mark.slow
async def test_postgres_data_survives_a_restart(pg_data_dir: Path) -> None:
    server = EmbeddedPostgres(pg_data_dir, settings={"fsync": "off"})
    with server:
        await ensure_database(server.url("postgres"), "jobs")
        conn = await asyncpg.connect(server.url("jobs"))
        await conn.execute("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")
        await conn.close()
        first_pid = server.pid
    assert not server.running
    server.stop()  # idempotent

    with server:
        assert server.pid != first_pid
        conn = await asyncpg.connect(server.url("jobs"))
        try:
            assert await conn.fetchval("SELECT v FROM kept") == "still here"
        finally:
            await conn.close()


async def test_postgres_url_works_with_sqlalchemy(pg_admin_url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(pg_admin_url.replace("postgresql://", "postgresql+asyncpg://"))
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 41 + 1"))).scalar_one() == 42
    finally:
        await engine.dispose()


async def test_eventually_returns_the_first_truthy_value() -> None:
    calls: list[int] = []

    async def third_time_lucky() -> int | None:
        calls.append(1)
        return len(calls) if len(calls) >= 3 else None

    assert await eventually(third_time_lucky, interval=0.001) == 3
    assert await eventually(lambda: "sync ok") == "sync ok"


async def test_eventually_fails_with_the_message() -> None:
    with pytest.raises(AssertionError, match="never true"):
        await eventually(lambda: False, timeout=0.05, interval=0.01, message="never true")
