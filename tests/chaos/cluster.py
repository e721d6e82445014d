"""The real stack as separate OS processes: PostgreSQL, NATS JetStream, job_service
replicas and workers, each of which a fault can kill, pause, stop or restart.

Processes are launched through ``tests.support.processes`` (one place builds every
environment). Restarted processes keep their port (replicas) or get a new incarnation id
(workers: ``w1.2`` is worker 1's second process), so that ``locked_by`` names a process;
except where a fault restarts a worker in place (``worker_crash``: a container restarted in
its pod keeps its worker id, and its new process ends the old one's leases, ADR 0003).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.embedded import EmbeddedNats, EmbeddedPostgres, ensure_database, free_port
from shared.grpc_client import aio_channel
from tests.chaos import agents
from tests.chaos.nats_cluster import NatsCluster
from tests.chaos.pg_failover import PgPair
from tests.chaos.profiles import StackSettings
from tests.support.agent_jobtypes import EFFECTS_FILE_ENV
from tests.support.blackhole_proxy import BlackHoleProxy, unix_socket_of
from tests.support.processes import (
    JobServiceProcess,
    WorkerProcess,
    client_config,
    job_service_env,
)

DATABASE = "jobs"
# PostgreSQL durable enough for a fast shutdown (it checkpoints); fsync only guards
# against the machine crashing, which no fault here does.
PG_SETTINGS = {"fsync": "off", "full_page_writes": "off", "max_connections": "100"}
SERVING_TIMEOUT_S = 60.0
START_TRIES = 3

log = logging.getLogger(__name__)


class Replica:
    """One job_service replica: a fixed port, restarted in place."""

    def __init__(self, cluster: Cluster, index: int) -> None:
        self.cluster = cluster
        self.name = f"js{index}"
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.incarnation = 0
        self.process: JobServiceProcess | None = None
        # the replica's way to PostgreSQL, when not the cluster's (the partition proxy)
        self.proxy: BlackHoleProxy | None = None

    @property
    def instance_id(self) -> str:
        return f"{self.name}.{self.incarnation}"

    @property
    def application_name(self) -> str:
        """What pg_stat_activity calls this incarnation's sessions."""
        return f"job_service {self.instance_id}"

    async def start(self) -> None:
        if self.process is not None:
            self.process.close()
        self.incarnation += 1
        c = self.cluster
        self.process = JobServiceProcess(
            c.log_dir,
            self.instance_id,
            self.proxy.postgres_url(c.database_name) if self.proxy is not None else c.database_url,
            c.nats.url,
            self.port,
            **c.settings.job_service_env(),
            **c.nats_env(),
        )
        await wait_serving(self.target, self.process)


class WorkerSlot:
    """One of the workers: a process, replaced by a new incarnation after a fault."""

    def __init__(self, cluster: Cluster, index: int, replica: Replica) -> None:
        self.cluster = cluster
        self.name = f"w{index}"
        self.replica = replica
        self.incarnation = 0
        self.process: WorkerProcess | None = None

    @property
    def worker_id(self) -> str:
        return f"{self.name}.{self.incarnation}"

    def start(self, *, same_id: bool = False) -> None:
        """A new process; ``same_id``: under the same worker id (a container restarted in
        its pod), else the next one."""
        if self.process is not None:
            self.process.close()  # the previous incarnation (kills it if still running)
        if not same_id:
            self.incarnation += 1
        c = self.cluster
        self.process = WorkerProcess(
            c.log_dir, self.worker_id, c.nats.url, c.worker_target, **c.worker_env()
        )


class Cluster:
    def __init__(
        self,
        root: Path,
        settings: StackSettings,
        *,
        replicas: int = 2,
        workers: int = 3,
        nats_servers: int = 1,
        pg_standby: bool = False,
    ) -> None:
        self.root = root
        self.settings = settings
        self.log_dir = root / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # one server, or a primary with a synchronous streaming standby (failover profile)
        self.pg_pair = PgPair(root, PG_SETTINGS) if pg_standby else None
        self.pg = (
            self.pg_pair.primary
            if self.pg_pair is not None
            else EmbeddedPostgres(root / "pg", settings=PG_SETTINGS)
        )
        self.database_name = DATABASE
        # one server, or a JetStream cluster with every stream on all of its servers
        self.nats: EmbeddedNats | NatsCluster = (
            NatsCluster(root / "nats", nats_servers)
            if nats_servers > 1
            else EmbeddedNats(root / "nats")
        )
        self.replicas = [Replica(self, i + 1) for i in range(replicas)]
        # workers spread over the replicas: each talks to one, as a pod talks to a service
        self.workers = [
            WorkerSlot(self, i + 1, self.replicas[i % replicas]) for i in range(workers)
        ]
        self.database_url = ""
        self._db: asyncpg.Pool | None = None

    def worker_env(self) -> dict[str, str]:
        """A worker process's environment: the stack's settings, and the file the agent
        jobs' effects go to (tests/chaos/agents.py)."""
        return {
            **self.settings.worker_env(),
            EFFECTS_FILE_ENV: str(self.log_dir / agents.EFFECTS_FILE),
        }

    def nats_env(self) -> dict[str, str]:
        if isinstance(self.nats, NatsCluster):
            return {"JOBS_NATS_STREAM_REPLICAS": str(len(self.nats.nodes))}
        return {}

    @property
    def targets(self) -> list[str]:
        return [r.target for r in self.replicas]

    @property
    def worker_target(self) -> str:
        """Every replica, balanced (round_robin), as a worker pod reaches the headless
        Service: a worker whose replica dies opens its session on another (ADR 0003)."""
        return "ipv4:" + ",".join(self.targets)

    async def start(self) -> None:
        await asyncio.to_thread(self.pg.start)
        await asyncio.to_thread(self.nats.start)
        await ensure_database(self.pg.url("postgres"), DATABASE)
        self.database_url = self.pg.url(DATABASE)
        env = job_service_env(self.database_url, self.nats.url, 0, "migrate")
        await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "job_service", "migrate"],
            env=env,
            check=True,
            capture_output=True,
        )
        if self.pg_pair is not None:
            await asyncio.to_thread(self.pg_pair.start_standby)
            await self.pg_pair.make_synchronous()
            # every process finds the server that accepts writes, whichever it is
            self.database_url = self.pg_pair.url(DATABASE)
        if self.pg_pair is None:
            # the last replica reaches PostgreSQL through a proxy that can cut it off
            proxied = self.replicas[-1]
            proxied.proxy = BlackHoleProxy(unix_socket_of(lambda: self.pg.socket_dir))
            await proxied.proxy.start()
        await asyncio.gather(*(r.start() for r in self.replicas))
        for worker in self.workers:
            worker.start()

    async def db(self) -> asyncpg.Pool:
        """A small pool for the harness's own queries (it survives PostgreSQL restarts:
        asyncpg replaces broken connections)."""
        if self._db is None:
            self._db = await asyncpg.create_pool(self.database_url, min_size=0, max_size=3)
        return self._db

    async def db_now(self) -> float:
        """The database clock, as a Unix timestamp: every recovery is measured on it."""
        pool = await self.db()
        value = await pool.fetchval("SELECT extract(epoch FROM clock_timestamp())")
        return float(value)

    # -- faults' building blocks

    async def restart_postgres(self, down_s: float) -> None:
        await asyncio.to_thread(self.pg.stop, mode="fast")
        await asyncio.sleep(down_s)  # the outage itself
        await start_with_retries(self.pg.start)

    async def restart_nats(self, *, lose_data: bool, down_s: float) -> None:
        await asyncio.to_thread(self.nats.stop)  # no-op when already stopped
        if lose_data:
            shutil.rmtree(self.nats.store_dir / "jetstream", ignore_errors=True)
        await asyncio.sleep(down_s)  # the outage itself
        await start_with_retries(self.nats.start)

    async def stop(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None
        for worker in self.workers:
            if worker.process is not None:
                worker.process.close()
        for replica in self.replicas:
            if replica.process is not None:
                replica.process.close()
            if replica.proxy is not None:
                await replica.proxy.stop()
        await asyncio.to_thread(self.nats.stop)
        if self.pg_pair is not None:
            await asyncio.to_thread(self.pg_pair.stop)
        else:
            await asyncio.to_thread(self.pg.stop)


async def start_with_retries(start: Callable[[], None]) -> None:
    """Start a server, trying again when the start itself failed: a child forked from this
    many-threaded process (gRPC) has been seen to crash before it could exec."""
    for attempt in range(1, START_TRIES + 1):
        try:
            await asyncio.to_thread(start)
            return
        except (RuntimeError, OSError, subprocess.SubprocessError):
            if attempt == START_TRIES:
                raise
            log.warning("server start failed (try %d of %d); trying again", attempt, START_TRIES)


async def wait_serving(target: str, process: JobServiceProcess) -> None:
    """Until job_service answers its health check with SERVING."""
    deadline = time.monotonic() + SERVING_TIMEOUT_S
    request = health_pb2.HealthCheckRequest(service="")
    async with aio_channel(client_config(target)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            if process.process.poll() is not None:
                raise RuntimeError(
                    f"job_service on {target} exited with {process.process.returncode}:\n"
                    + process.log()[-3000:]
                )
            try:
                reply = await stub.Check(request, timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"job_service on {target} not serving")
            await asyncio.sleep(0.05)  # poll interval, bounded by the deadline
