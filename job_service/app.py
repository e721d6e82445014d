"""The composition root of job_service: connects to PostgreSQL and NATS, has the concerns
wired (``job_service.wiring``: the adapters into the use cases, those into the gRPC server
and the loops), then serves, reports health and shuts down in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket

import asyncpg
import grpc
from grpc_health.v1 import health, health_pb2
from nats.aio.client import Client as NATS

from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.server import SERVICE_NAMES, server_credentials
from job_service.adapters.postgres.credentials import CredentialRepository
from job_service.adapters.postgres.job_types import JobTypeRepository
from job_service.adapters.postgres.pool import HOT_PATH_SESSION, create_pool
from job_service.databases import check_schema, rest_pool_size, session_guards
from job_service.domain.declared_types import JobTypes
from job_service.loops import Supervisor
from job_service.settings import JobServiceSettings
from job_service.usecases.credentials import CredentialVault
from job_service.usecases.job_types import DeclaredJobTypes
from job_service.usecases.sessions import WorkerSessions
from job_service.usecases.watch import WatchHub
from job_service.wiring.assembly import wire
from job_service.wiring.connections import Connections
from job_service.wiring.sealing import sealer
from shared.jetstream import ensure_streams
from shared.lifetime import Lifetime
from shared.metrics import MetricsServer, publish_build_info
from shared.startup import connect_nats, within_startup

log = logging.getLogger(__name__)


class JobServiceApp(Lifetime):
    """job_service as one object: ``async with JobServiceApp(settings) as app: await
    app.wait()``. ``port`` is the bound gRPC port (useful with port 0)."""

    def __init__(self, settings: JobServiceSettings) -> None:
        self.settings = settings
        # The job types workers declared; no job type's code is ever loaded here.
        self.registry = JobTypes()
        self.declared: DeclaredJobTypes | None = None
        self.instance_id = settings.instance_id or f"{socket.gethostname()}-{os.getpid()}"
        self.port = 0
        # Two pools: the hot path's statements with generic plans, the rest with custom
        # ones (HOT_PATH_SESSION says why).
        self._pool: asyncpg.Pool | None = None
        self._hot_pool: asyncpg.Pool | None = None
        self._nc: NATS | None = None
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._stopped = asyncio.Event()
        self._loops: Supervisor | None = None
        self._watches: WatchHub | None = None
        self._sessions: WorkerSessions | None = None
        self._stopping: asyncio.Future[None] | None = None
        self.metrics = MetricsServer(settings.metrics_host, settings.metrics_port)

    async def start(self) -> None:
        """Connect, wire, serve and start the loops; a start that fails stops what it had
        started before it raises."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        s = self.settings
        # before anything starts: a server nobody may call is a configuration mistake
        tokens = TokenTable.from_settings(s)
        tls = server_credentials(s)
        self.metrics.start()  # first: a port in use fails fast
        publish_build_info("job_service")
        pool = await self._connect_postgres()
        credentials = CredentialRepository(pool)
        vault = CredentialVault(credentials, s.keyring())
        # Refuse to start rather than fail every job whose key cannot be opened.
        await vault.check_master_keys()
        await self._connect_nats()
        assert self._pool is not None and self._hot_pool is not None and self._nc is not None
        declared = self.declared = DeclaredJobTypes(JobTypeRepository(pool), self.registry)
        await declared.load()
        connections = Connections(
            s, declared, self.instance_id, self._pool, self._hot_pool, self._nc, sealer(s, pool)
        )
        wired = await wire(connections, tokens, credentials, vault, self._health, self._stopped)
        self._server, self._loops = wired.server, wired.loops
        self._watches, self._sessions = wired.watches, wired.sessions
        address = f"{s.grpc_host}:{s.grpc_port}"
        if tls is None:
            self.port = self._server.add_insecure_port(address)
        else:
            self.port = self._server.add_secure_port(address, tls)
        await self._server.start()
        self._loops.start()
        for service in ("", *SERVICE_NAMES):
            await self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "job_service %s serving gRPC on %s:%d, metrics on %s",
            self.instance_id,
            s.grpc_host,
            self.port,
            f"port {self.metrics.port}" if self.metrics.port is not None else "no port",
        )

    async def _connect_postgres(self) -> asyncpg.Pool:
        """Open both pools (once the schema is this release's); returns the rest's."""
        s = self.settings
        guards, rest = session_guards(s), session_guards(s, hot=False)
        # pg_stat_activity names the replica of each session
        session = {**s.session_settings(), "application_name": f"job_service {self.instance_id}"}
        # Unreachable dependencies at start-up: retried until startup_timeout_s, then
        # DependencyUnavailable (the process exits non-zero with that message).
        self._pool = await within_startup(
            "PostgreSQL",
            s.startup_timeout_s,
            lambda: create_pool(s.database_url, rest_pool_size(s), session, rest),
        )
        await check_schema(self._pool)
        self._hot_pool = await create_pool(
            s.database_url, s.db_pool_size, {**session, **HOT_PATH_SESSION}, guards
        )
        return self._pool

    async def _connect_nats(self) -> None:
        s = self.settings
        # Reconnect forever (once connected): while NATS is away the outbox holds the rows.
        pings = s.nats_pings()
        self._nc = await within_startup(
            "NATS",
            s.startup_timeout_s,
            lambda: connect_nats(
                s.nats_url,
                f"job_service {self.instance_id}",
                security=s.nats_security(),
                **pings,
            ),
        )
        # retried too: a JetStream cluster that is still electing its leaders (or creating
        # replicated streams on a loaded machine) times requests out for a while
        nc = self._nc
        await within_startup(
            "JetStream streams",
            s.startup_timeout_s,
            lambda: ensure_streams(nc.jetstream(), s.nats_stream_replicas),
        )

    @property
    def tls(self) -> bool:
        return bool(self.settings.tls_cert_file)

    async def wait(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        """Not serving → refuse new RPCs after the shutdown delay, let in-flight ones
        finish (grace) → stop loops → close NATS and the pool. Idempotent: a second call
        waits for the first."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        self._stopped.set()
        if self._watches is not None:
            self._watches.close()  # streams would otherwise hold the grace period
        if self._server is not None:
            server, self._server = self._server, None
            await self._health.enter_graceful_shutdown()
            # Health says NOT_SERVING at once; RPCs are still served for shutdown_delay_s
            # so that balancers and clients move away before calls are refused.
            if self.settings.shutdown_delay_s > 0:
                await asyncio.sleep(self.settings.shutdown_delay_s)
            stopping = asyncio.ensure_future(server.stop(self.settings.shutdown_grace_s))
            if self._sessions is not None:
                # worker sessions end now (their workers open new ones elsewhere) and would
                # otherwise hold the grace period; disconnects seen are still decided
                await self._sessions.close()
            await stopping
        if self._loops is not None:
            await self._loops.stop(self.settings.shutdown_grace_s)
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()
            self._nc = None
        if self._hot_pool is not None:
            await self._hot_pool.close()
            self._hot_pool = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        self.metrics.stop()
