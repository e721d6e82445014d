"""PostgreSQL's binaries started as root while gRPC threads are busy (issue 43, the
segmentation fault): subprocess's ``user=``/``group=`` made Python fork() instead of vfork(),
the fork ran gRPC's fork handlers in the child, and about every other child crashed before
its exec ("Fatal Python error: Segmentation fault" from the chaos harness, which restarts
PostgreSQL while its workload's channels are open). They run through setpriv now."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from devstack.embedded import EmbeddedPostgres

RUNS = 100


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="only root drops to the PostgreSQL user")
async def test_pg_ctl_started_as_root_survives_busy_grpc_threads(pg_data_dir: Path) -> None:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = health_pb2_grpc.HealthStub(channel)
    done = asyncio.Event()

    async def calls() -> None:
        while not done.is_set():
            await stub.Check(health_pb2.HealthCheckRequest())

    postgres = EmbeddedPostgres(pg_data_dir)
    run_as = postgres._prepare_filesystem()
    traffic = [asyncio.create_task(calls()) for _ in range(4)]
    try:
        codes = [await asyncio.to_thread(postgres._pg_ctl_status, run_as) for _ in range(RUNS)]
    finally:
        done.set()
        await asyncio.gather(*traffic)
        await channel.close()
        await server.stop(None)

    # pg_ctl status on a directory with no cluster: 4, every time; a child killed by a
    # signal before its exec is negative
    assert [c for c in codes if c < 0] == []
    assert set(codes) == {4}
