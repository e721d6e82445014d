"""A short part of the chaos ``cluster`` profile for ``make test``: a real three-server
JetStream cluster (tests/chaos/nats_cluster.py), the job engine's streams declared R3, the
stream leader SIGKILLed. Every acknowledged dispatch message must still be in the stream
on the two survivors (sync_interval: always, a quorum acknowledged it), a new leader must
take writes, and a worker's own declaration must not scale the streams back to one server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient

from shared.constants import DISPATCH_STREAM, dispatch_subject
from shared.jetstream import ensure_streams
from shared.startup import nats_servers
from tests.chaos.cluster_faults import stream_leader
from tests.chaos.nats_cluster import NatsCluster

MESSAGES = 20
LEADER_TIMEOUT_S = 30.0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    nats_cluster = NatsCluster(tmp_path / "nats")
    try:
        await asyncio.to_thread(nats_cluster.start)
        yield nats_cluster
    finally:
        await asyncio.to_thread(nats_cluster.stop)


async def _connect(urls: list[str]) -> NatsClient:
    return await nats.connect(urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2)


async def _new_leader(urls: list[str], old: str | None = None) -> str:
    """The stream's leader once it has one other than ``old`` (None: any)."""
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    while time.monotonic() < deadline:
        leader = await stream_leader(urls)
        if leader is not None and leader != old:
            return leader
        await asyncio.sleep(0.2)  # poll for an election, bounded by the deadline
    raise AssertionError(f"no new stream leader within {LEADER_TIMEOUT_S}s")


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_acknowledged_dispatches_survive_the_stream_leaders_crash(
    cluster: NatsCluster,
) -> None:
    urls = nats_servers(cluster.url)
    nc = await _connect(urls)
    try:
        js = nc.jetstream(timeout=10)
        await ensure_streams(js, 3)  # the job service
        await ensure_streams(js)  # a worker: keeps R3
        info = await js.stream_info(DISPATCH_STREAM)
        assert info.config.num_replicas == 3
        # A new R3 stream takes writes once its replicas have elected a leader: before
        # that a publish has no responder (a clean CI run failed on it once)
        await _new_leader(urls)
        for n in range(MESSAGES):
            await js.publish(dispatch_subject("ai-interactive"), f"job-{n}".encode())

        leader = await stream_leader(urls)
        assert leader is not None
        cluster.node(leader).kill()
        survivors = [n.url for n in cluster.nodes if n.name != leader]
        await _new_leader(survivors, leader)

        nc2 = await _connect(survivors)
        try:
            js2 = nc2.jetstream(timeout=10)
            state = (await js2.stream_info(DISPATCH_STREAM)).state
            assert state.messages == MESSAGES  # nothing acknowledged was lost
            await js2.publish(dispatch_subject("ai-interactive"), b"after")  # writable
        finally:
            await nc2.close()

        node = cluster.node(leader)
        node.start()
        await asyncio.to_thread(cluster.wait_ready, [node])
    finally:
        await nc.close()
