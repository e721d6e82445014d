"""Faults of a three-node NATS cluster (the ``cluster`` profile): crash the JetStream
stream leader or a follower and restart it, pause the leader past the election timeout (a
partition: the node is cut off, then comes back with stale state), and kill two of three
(no quorum: JetStream refuses writes until a node returns).

NATS is a hint: whatever these faults lose or delay, the outbox and the dispatch
reconciler send again from PostgreSQL, and the checker judges every job from the database.
Each fault records the client's view (a fresh job created and succeeded, ``probe_s``) and
notes when the stream had a leader again.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable

import nats
from nats.errors import Error as NatsError

from shared.constants import DISPATCH_STREAM
from shared.startup import nats_servers
from tests.chaos.faults import OUTAGE_S, PROBE_TIMEOUT_S, FaultContext, FaultRecord, _probe
from tests.chaos.nats_cluster import NatsCluster, NatsNode

# NATS's Raft elects a new leader after 4 to 9 s without the old one: pause past that.
PAUSE_S = 12.0
# how long two of three stay down (no quorum)
QUORUM_LOSS_S = 3.0
LEADER_TIMEOUT_S = 30.0


def _nats(ctx: FaultContext) -> NatsCluster:
    cluster = ctx.cluster.nats
    assert isinstance(cluster, NatsCluster), "the cluster faults need the cluster profile"
    return cluster


async def stream_leader(urls: list[str], timeout_s: float = 2.0) -> str | None:
    """The name of the dispatch stream's leader as the live nodes see it, or None."""
    try:
        nc = await asyncio.wait_for(
            nats.connect(urls, connect_timeout=1, max_reconnect_attempts=0, allow_reconnect=False),
            timeout_s,
        )
    except (TimeoutError, NatsError, OSError):
        return None
    try:
        info = await nc.jetstream().stream_info(DISPATCH_STREAM)
        return info.cluster.leader if info.cluster is not None else None
    except (TimeoutError, NatsError, OSError):
        return None
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def _leader_node(cluster: NatsCluster) -> NatsNode:
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    while time.monotonic() < deadline:
        name = await stream_leader(nats_servers(cluster.url))
        if name is not None:
            return cluster.node(name)
        await asyncio.sleep(0.2)  # poll for a leader, bounded above
    raise RuntimeError("the dispatch stream has no leader")


async def _new_leader_after(
    cluster: NatsCluster, old: str, started: float, record: FaultRecord
) -> None:
    """Notes how long until the live nodes name a stream leader other than ``old``."""
    live = [n.url for n in cluster.nodes if n.name != old and n.running and not n.paused]
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    while time.monotonic() < deadline:
        name = await stream_leader(live)
        if name is not None and name != old:
            record.notes.append(f"new stream leader {name} after {time.monotonic() - started:.1f}s")
            return
        await asyncio.sleep(0.1)  # poll for a leader, bounded above
    record.violations.append(f"no new stream leader within {LEADER_TIMEOUT_S}s")


async def _restart(cluster: NatsCluster, nodes: list[NatsNode], record: FaultRecord) -> None:
    for node in nodes:
        node.start()
    took = await asyncio.to_thread(cluster.wait_ready, nodes)
    record.notes.append(f"{'+'.join(n.name for n in nodes)} healthy {took:.1f}s after restart")


async def nats_leader_kill(ctx: FaultContext) -> FaultRecord:
    """SIGKILL the dispatch stream's leader, restart it after a second."""
    cluster = _nats(ctx)
    leader = await _leader_node(cluster)
    record = FaultRecord("nats_leader_kill", leader.name, await ctx.cluster.db_now())
    started = time.monotonic()
    leader.kill()
    probe = asyncio.create_task(_probe(ctx, record, started))
    await _new_leader_after(cluster, leader.name, started, record)
    await asyncio.sleep(OUTAGE_S)
    await _restart(cluster, [leader], record)
    await probe
    return record


async def nats_follower_kill(ctx: FaultContext) -> FaultRecord:
    """SIGKILL a node that leads nothing we use, restart it after a second."""
    cluster = _nats(ctx)
    leader = await _leader_node(cluster)
    follower = ctx.rng.choice([n for n in cluster.nodes if n is not leader])
    record = FaultRecord("nats_follower_kill", follower.name, await ctx.cluster.db_now())
    started = time.monotonic()
    follower.kill()
    probe = asyncio.create_task(_probe(ctx, record, started))
    await asyncio.sleep(OUTAGE_S)
    await _restart(cluster, [follower], record)
    await probe
    return record


async def nats_partition(ctx: FaultContext) -> FaultRecord:
    """SIGSTOP the stream leader past the election timeout (cut off from its peers and its
    clients), then SIGCONT: the others elect a leader; the old one must step down and
    catch up. A fresh job is probed while it is cut off."""
    cluster = _nats(ctx)
    leader = await _leader_node(cluster)
    record = FaultRecord("nats_partition", leader.name, await ctx.cluster.db_now())
    started = time.monotonic()
    leader.signal(signal.SIGSTOP)
    probe = asyncio.create_task(_probe(ctx, record, started))
    try:
        await _new_leader_after(cluster, leader.name, started, record)
        await asyncio.sleep(max(0.0, PAUSE_S - (time.monotonic() - started)))
    finally:
        leader.signal(signal.SIGCONT)
    took = await asyncio.to_thread(cluster.wait_ready, [leader])
    record.notes.append(f"paused {PAUSE_S:g}s; {leader.name} healthy {took:.1f}s after SIGCONT")
    await probe
    return record


async def nats_quorum_loss(ctx: FaultContext) -> FaultRecord:
    """SIGKILL two of three nodes (the leader among them): no quorum, JetStream refuses
    writes and deliveries; the outbox holds the rows. Both restart after a few seconds."""
    cluster = _nats(ctx)
    leader = await _leader_node(cluster)
    other = ctx.rng.choice([n for n in cluster.nodes if n is not leader])
    victims = [leader, other]
    record = FaultRecord(
        "nats_quorum_loss", "+".join(n.name for n in victims), await ctx.cluster.db_now()
    )
    started = time.monotonic()
    for node in victims:
        node.kill()
    await asyncio.sleep(QUORUM_LOSS_S)
    await _restart(cluster, victims, record)
    await _probe(ctx, record, started)
    record.notes.append(f"quorum lost for {QUORUM_LOSS_S:g}s")
    return record


CLUSTER_FAULTS: dict[str, Callable[[FaultContext], Awaitable[FaultRecord]]] = {
    "nats_leader_kill": nats_leader_kill,
    "nats_follower_kill": nats_follower_kill,
    "nats_partition": nats_partition,
    "nats_quorum_loss": nats_quorum_loss,
}
assert PROBE_TIMEOUT_S > PAUSE_S  # a probe started during a pause can still get through
