"""The database unreachable: calls answer UNAVAILABLE with PLATFORM_UNAVAILABLE (a caller
may retry), never INTERNAL, and the service recovers by itself when it is back."""

from __future__ import annotations

import asyncpg
import grpc
import pytest

from shared.errors import PlatformUnavailable
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client
from tests.support.wait import eventually


async def test_a_database_outage_is_platform_unavailable_and_passes(
    client: Client, db: asyncpg.Connection, database_url: str
) -> None:
    job = (await client.create()).job
    name = await db.fetchval("SELECT current_database()")
    admin = await asyncpg.connect(database_url.replace(f"/{name}", "/postgres"))
    try:
        await admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
        )
        # termination is asynchronous: wait until the service's connections are gone
        await eventually(
            lambda: admin.fetchval(
                "SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = $1", name
            ),
            message="connections survived pg_terminate_backend",
        )
        for _ in range(3):  # the pool's dead connections, then new ones refused
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await client.get(job.id)
            assert raised.value.code() is grpc.StatusCode.UNAVAILABLE, raised.value.details()
            assert isinstance(error_from_rpc(raised.value), PlatformUnavailable)
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        await admin.close()
    assert (await client.get(job.id)).id == job.id
