"""The composition root of job_service: wires the store, NATS, the engine, the background
loops and the gRPC server, and runs them under one supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path
from types import TracebackType

import asyncpg
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from nats.aio.client import Client as NATS

from job_service.adapters.admin_api import AdminServicer
from job_service.adapters.auth import AuthInterceptor, TokenTable
from job_service.adapters.credential_api import CredentialServicer
from job_service.adapters.credential_repository import CredentialRepository
from job_service.adapters.executor_api import ExecutorServicer
from job_service.adapters.gauges import DatabaseGauges
from job_service.adapters.grpc_errors import ErrorInterceptor
from job_service.adapters.job_api import JobServicer
from job_service.adapters.listing import JobListing
from job_service.adapters.nats_publisher import NatsPublisher
from job_service.adapters.outbox_store import OutboxStore
from job_service.adapters.repository import JobRepository, create_pool
from job_service.credentials import CredentialVault
from job_service.domain.models import Quotas
from job_service.domain.paging import PageTokens
from job_service.engine import REAP_BATCH, REDISPATCH_BATCH, SNAPSHOT_CLEAN_BATCH, JobEngine
from job_service.operations import Operations
from job_service.outbox import OutboxDispatcher
from job_service.periodic import Periodic
from job_service.settings import JobServiceSettings
from job_service.watch import WatchHub
from shared.jetstream import ensure_streams
from shared.metrics import MetricsServer
from shared.pb.jobs.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    credential_service_pb2,
    credential_service_pb2_grpc,
    executor_service_pb2,
    executor_service_pb2_grpc,
    job_service_pb2,
    job_service_pb2_grpc,
)
from shared.registry import Registry, default_registry
from shared.startup import connect_nats, within_startup

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
PRUNE_BATCH = 1000

SERVICE_NAMES = (
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    executor_service_pb2.DESCRIPTOR.services_by_name["ExecutorService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    credential_service_pb2.DESCRIPTOR.services_by_name["CredentialService"].full_name,
)
# Stands for "no interval": the watch poller never runs again at once.
_NEVER_FULL = 1 << 30


class JobServiceApp:
    """job_service as one object: ``async with JobServiceApp(settings) as app: await
    app.wait()``. ``port`` is the bound gRPC port (useful with port 0)."""

    def __init__(self, settings: JobServiceSettings, registry: Registry | None = None) -> None:
        self.settings = settings
        self.registry = registry or default_registry()
        self.instance_id = settings.instance_id or f"{socket.gethostname()}-{os.getpid()}"
        self.port = 0
        self._pool: asyncpg.Pool | None = None
        self._nc: NATS | None = None
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self._dispatcher: OutboxDispatcher | None = None
        self._housekeeping: list[Periodic] = []
        self._watches: WatchHub | None = None
        self._stopping: asyncio.Future[None] | None = None
        self.metrics = MetricsServer(settings.metrics_host, settings.metrics_port)

    async def start(self) -> None:
        s = self.settings
        # before anything starts: a server nobody may call is a configuration mistake
        tokens = TokenTable.from_settings(s)
        tls = _server_credentials(s)
        self.metrics.start()  # first: a port in use fails fast
        # Unreachable dependencies at start-up: retried until startup_timeout_s, then
        # DependencyUnavailable (the process exits non-zero with that message).
        self._pool = await within_startup(
            "PostgreSQL", s.startup_timeout_s, lambda: create_pool(s.database_url, s.db_pool_size)
        )
        credentials = CredentialRepository(self._pool)
        vault = CredentialVault(credentials, s.keyring())
        # Refuse to start rather than fail every job whose key cannot be opened.
        await vault.check_master_keys()
        # Reconnect forever (once connected): while NATS is away the outbox holds the rows.
        self._nc = await within_startup(
            "NATS",
            s.startup_timeout_s,
            lambda: connect_nats(s.nats_url, f"job_service {self.instance_id}"),
        )
        await ensure_streams(self._nc.jetstream())
        publisher = NatsPublisher(self._nc)
        outbox = OutboxStore(self._pool)
        self._dispatcher = OutboxDispatcher(
            outbox,
            publisher,
            owner=self.instance_id,
            batch_size=s.outbox_batch_size,
            poll_interval_s=s.outbox_poll_interval_s,
            claim_ttl_s=s.outbox_claim_ttl_s,
            max_attempts=s.outbox_max_attempts,
        )
        repository = JobRepository(self._pool, lease_ttl_s=s.lease_ttl_s)
        engine = JobEngine(
            self.registry,
            repository,
            publisher,
            self._dispatcher,
            credentials,
            Quotas(max_active=s.max_active_jobs_per_user, daily=s.daily_job_quota_per_user),
        )
        listing = JobListing(self._pool)
        operations = Operations(
            self.registry,
            repository,
            listing,
            PageTokens(await _page_token_secret(s, listing)),
            self._dispatcher,
        )
        watches = self._watches = WatchHub(listing)
        self._housekeeping = [
            Periodic(
                "lease reaper",
                engine.reap_expired_leases,
                interval_s=s.reaper_interval_s,
                batch=REAP_BATCH,
            ),
            Periodic(
                "dispatch reconciler",
                lambda: engine.redispatch_stranded(s.reconcile_after_s),
                interval_s=s.reconcile_interval_s,
                batch=REDISPATCH_BATCH,
            ),
            Periodic(
                "outbox pruner",
                lambda: outbox.prune(s.outbox_retention_s, PRUNE_BATCH),
                interval_s=s.outbox_prune_interval_s,
                batch=PRUNE_BATCH,
            ),
            Periodic(
                "snapshot cleaner",
                engine.delete_expired_snapshots,
                interval_s=s.snapshot_clean_interval_s,
                batch=SNAPSHOT_CLEAN_BATCH,
            ),
            Periodic(
                "watch poller",
                watches.poll,
                interval_s=s.watch_poll_interval_s,
                batch=_NEVER_FULL,
            ),
            Periodic(
                "metrics collector",
                DatabaseGauges(self._pool, self.registry.queue_concurrency()).refresh,
                interval_s=s.metrics_collect_interval_s,
                batch=1,
            ),
        ]
        self._server = self._build_server(engine, vault, operations, watches, tokens)
        address = f"{s.grpc_host}:{s.grpc_port}"
        if tls is None:
            self.port = self._server.add_insecure_port(address)
        else:
            self.port = self._server.add_secure_port(address, tls)
        await self._server.start()
        loops = [("outbox dispatcher", self._dispatcher.run)]
        loops += [(periodic.name, periodic.run) for periodic in self._housekeeping]
        for name, loop in loops:
            task = asyncio.create_task(loop(), name=f"job_service {name}")
            task.add_done_callback(self._on_loop_exit)
            self._tasks.append(task)
        for service in ("", *SERVICE_NAMES):
            await self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "job_service %s serving gRPC on %s:%d, metrics on %s",
            self.instance_id,
            s.grpc_host,
            self.port,
            f"port {self.metrics.port}" if self.metrics.port is not None else "no port",
        )

    def _build_server(
        self,
        engine: JobEngine,
        vault: CredentialVault,
        operations: Operations,
        watches: WatchHub,
        tokens: TokenTable,
    ) -> grpc.aio.Server:
        server = grpc.aio.server(
            # outermost first: the error interceptor translates the auth refusals too
            interceptors=[ErrorInterceptor(), AuthInterceptor(tokens)],
            # batch submits carry many outputs; the default 4 MiB would refuse a few large ones
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        job_service_pb2_grpc.add_JobServiceServicer_to_server(  # type: ignore[no-untyped-call]
            JobServicer(engine, operations, watches), server
        )
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
            AdminServicer(operations, self.registry), server
        )
        executor_service_pb2_grpc.add_ExecutorServiceServicer_to_server(  # type: ignore[no-untyped-call]
            ExecutorServicer(
                engine,
                vault,
                lease_ttl_s=self.settings.lease_ttl_s,
                heartbeat_interval_s=self.settings.heartbeat_interval_s,
            ),
            server,
        )
        credential_service_pb2_grpc.add_CredentialServiceServicer_to_server(  # type: ignore[no-untyped-call]
            CredentialServicer(vault), server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        return server

    @property
    def tls(self) -> bool:
        return bool(self.settings.tls_cert_file)

    def _on_loop_exit(self, task: asyncio.Task[None]) -> None:
        """A background loop must never end on its own: if one does, stop the whole."""
        if not task.cancelled() and not self._stopped.is_set():
            log.error("background loop %s ended: %r; stopping", task.get_name(), task.exception())
            self._stopped.set()

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
            await server.stop(self.settings.shutdown_grace_s)
        if self._dispatcher is not None:
            self._dispatcher.stop()
        for periodic in self._housekeeping:
            periodic.stop()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=self.settings.shutdown_grace_s)
            for task in self._tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks.clear()
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()
            self._nc = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        self.metrics.stop()

    async def __aenter__(self) -> JobServiceApp:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def reseal_credentials(settings: JobServiceSettings) -> int:
    """Re-seal every stored user key under the current master key (after a rotation, so
    that the retired key can be dropped); how many were re-sealed."""
    keyring = settings.keyring()
    if keyring is None:
        raise ValueError("JOBS_CREDENTIALS_MASTER_KEY is not set")
    pool = await create_pool(settings.database_url, 2)
    try:
        return await CredentialVault(CredentialRepository(pool), keyring).reseal_all()
    finally:
        await pool.close()


def _server_credentials(s: JobServiceSettings) -> grpc.ServerCredentials | None:
    """TLS when a certificate is configured; mutual TLS (client certificates required and
    checked against JOBS_TLS_CLIENT_CA_FILE) when a client CA is, too."""
    if not s.tls_cert_file:
        return None
    client_ca = Path(s.tls_client_ca_file).read_bytes() if s.tls_client_ca_file else None
    return grpc.ssl_server_credentials(
        [(Path(s.tls_key_file).read_bytes(), Path(s.tls_cert_file).read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


async def _page_token_secret(s: JobServiceSettings, listing: JobListing) -> bytes:
    if s.page_token_secret:
        return s.page_token_secret.encode()
    secret = await listing.page_token_secret()
    if secret is None:
        raise RuntimeError("no page token secret: run `python -m job_service migrate` first")
    return secret
