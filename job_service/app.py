"""The composition root of job_service: wires the postgres, NATS and gRPC adapters to the
use cases, starts the background loops and the gRPC server, and runs them under one
supervisor."""

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
from job_service.adapters.grpc.server import SERVICE_NAMES, build_server, server_credentials
from job_service.adapters.nats_partials import NatsPartialOutputFeed
from job_service.adapters.nats_publisher import NatsPublisher
from job_service.adapters.postgres.batches import BatchRepository
from job_service.adapters.postgres.bulk import BulkRepository
from job_service.adapters.postgres.call_permits import CallPermitRepository
from job_service.adapters.postgres.claims import ClaimRepository
from job_service.adapters.postgres.console_sessions import ConsoleSessionRepository
from job_service.adapters.postgres.credentials import CredentialRepository
from job_service.adapters.postgres.dependencies import DependencyRepository
from job_service.adapters.postgres.jobs import JobRepository
from job_service.adapters.postgres.leases import AttemptTransaction, LeaseRepository
from job_service.adapters.postgres.listing import JobListing
from job_service.adapters.postgres.new_jobs import NewJobRepository
from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.adapters.postgres.pool import HOT_PATH_SESSION, create_pool
from job_service.adapters.postgres.queues import QueueRepository
from job_service.adapters.postgres.rate_limits import RateLimitRepository
from job_service.adapters.postgres.reruns import RerunRepository
from job_service.adapters.postgres.results import ResultRepository
from job_service.adapters.postgres.schedules import ScheduleRepository
from job_service.adapters.postgres.sessions import SessionRepository
from job_service.adapters.postgres.signals import SignalRepository
from job_service.adapters.postgres.steps import StepRepository
from job_service.adapters.postgres.usage_reports import UsageReportRepository
from job_service.databases import check_schema, rest_pool_size, session_guards
from job_service.domain.paging import PageTokens
from job_service.domain.quotas import Quotas
from job_service.domain.rate_limits import TierBudgets
from job_service.loops import Supervisor, housekeeping
from job_service.periodic import Periodic
from job_service.settings import JobServiceSettings
from job_service.usecases.admin import Admin
from job_service.usecases.bulk import BulkActions
from job_service.usecases.call_permits import CallPermits
from job_service.usecases.claims import Claims
from job_service.usecases.console_sessions import ConsoleSessions
from job_service.usecases.credentials import CredentialVault
from job_service.usecases.dependencies import (
    RESOLVE_BATCH,
    RESOLVE_INTERVAL_S,
    DependencyResolver,
    DependencyResults,
)
from job_service.usecases.firing import ScheduleFiring
from job_service.usecases.grants import Grants
from job_service.usecases.jobs import Jobs
from job_service.usecases.leases import Leases
from job_service.usecases.new_jobs import NewJobs
from job_service.usecases.outbox import OutboxDispatcher, OutboxUpkeep
from job_service.usecases.queues import Queues
from job_service.usecases.rate_limits import RateReservations
from job_service.usecases.results import Results
from job_service.usecases.schedules import Schedules
from job_service.usecases.sessions import WorkerSessions
from job_service.usecases.signals import Signals
from job_service.usecases.steps import Steps
from job_service.usecases.usage import UsageReports
from job_service.usecases.waiting_workers import WaitingWorkers
from job_service.usecases.watch import WatchHub
from shared.jetstream import ensure_streams
from shared.lifetime import Lifetime
from shared.metrics import MetricsServer, publish_build_info
from shared.registry import Registry, default_registry
from shared.startup import connect_nats, within_startup

log = logging.getLogger(__name__)


class JobServiceApp(Lifetime):
    """job_service as one object: ``async with JobServiceApp(settings) as app: await
    app.wait()``. ``port`` is the bound gRPC port (useful with port 0)."""

    def __init__(self, settings: JobServiceSettings, registry: Registry | None = None) -> None:
        self.settings = settings
        self.registry = registry or default_registry()
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
        self._server, self._loops = await self._wire(tokens, credentials, vault)
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

    async def _wire(
        self, tokens: TokenTable, credentials: CredentialRepository, vault: CredentialVault
    ) -> tuple[grpc.aio.Server, Supervisor]:
        """The adapters into the use cases, and those into the server and the loops."""
        s = self.settings
        assert self._pool is not None and self._hot_pool is not None and self._nc is not None
        hot = self._hot_pool
        publisher = NatsPublisher(self._nc, stream_replicas=s.nats_stream_replicas)
        outbox_store = OutboxRepository(hot)
        dispatcher = OutboxDispatcher(
            outbox_store,
            publisher,
            owner=self.instance_id,
            batch_size=s.outbox_batch_size,
            poll_interval_s=s.outbox_poll_interval_s,
            claim_ttl_s=s.outbox_claim_ttl_s,
            max_attempts=s.outbox_max_attempts,
        )
        outbox = OutboxUpkeep(outbox_store, dispatcher)
        job_store = JobRepository(hot)
        jobs = Jobs(self.registry, job_store, publisher, dispatcher)
        new_job_store = NewJobRepository(hot, dispatcher.owner)
        new_jobs = NewJobs(
            self.registry,
            new_job_store,
            BatchRepository(hot, dispatcher.owner),
            credentials,
            dispatcher,
            dispatcher,
            Quotas(
                max_active=s.max_active_jobs_per_user,
                daily=s.daily_job_quota_per_user,
                daily_cost_usd=s.daily_cost_budget_usd_per_user,
            ),
        )
        budgets = TierBudgets(s.tier_rate_limits(), s.rate_limit_recovery_s)
        rates = RateLimitRepository(hot, budgets)
        await rates.ensure_buckets()
        reservations = RateReservations(rates)
        permits = CallPermits(CallPermitRepository(hot), budgets, slack_s=s.rate_limit_call_slack_s)
        await permits.ensure_buckets()
        leases = Leases(
            self.registry, LeaseRepository(hot, lease_ttl_s=s.lease_ttl_s), dispatcher, reservations
        )
        sessions = self._sessions = WorkerSessions(
            SessionRepository(self._pool, AttemptTransaction),
            leases,
            instance_id=self.instance_id,
            grace_s=s.worker_disconnect_grace_s,
            reconnect_grace_s=s.worker_reconnect_grace_s,
            ping_interval_s=s.worker_session_ping_interval_s,
        )
        claims = Claims(
            self.registry,
            ClaimRepository(hot, lease_ttl_s=s.lease_ttl_s),
            rates,
            budgets,
            queue_limits=s.queue_limits(),
        )
        queues = Queues(self.registry, QueueRepository(self._pool, s.queue_limits()), rates)
        results = Results(
            self.registry,
            ResultRepository(hot, dispatcher.owner),
            leases,
            dispatcher,
            reservations,
        )
        waiting = WaitingWorkers() if s.push_grants else None
        grants = Grants(claims, leases, StepRepository(hot), waiting)
        dispatcher.push_grants_with(grants.push if waiting is not None else None)
        dependency_store = DependencyRepository(hot)
        listing = JobListing(self._pool)
        page_tokens = PageTokens(await _page_token_secret(s, listing))
        admin = Admin(
            self.registry,
            job_store,
            RerunRepository(hot),
            listing,
            outbox_store,
            page_tokens,
            dispatcher,
            dependency_store,
        )
        bulk = BulkActions(
            self.registry,
            admin,
            BulkRepository(self._pool),
            page_tokens,
            publisher,
            dispatcher,
        )
        rounds = s.db_statement_timeout_s
        schedule_store = ScheduleRepository(self._pool, round_statement_timeout_s=rounds)
        schedules = Schedules(new_jobs, jobs, schedule_store, page_tokens)
        watches = self._watches = WatchHub(listing, NatsPartialOutputFeed(self._nc), self.registry)
        server = build_server(
            s,
            self.registry,
            tokens,
            self._health,
            new_jobs=new_jobs,
            jobs=jobs,
            leases=leases,
            results=results,
            grants=grants,
            permits=permits,
            dependencies=DependencyResults(dependency_store),
            queues=queues,
            admin=admin,
            console_sessions=ConsoleSessions(ConsoleSessionRepository(self._pool)),
            bulk=bulk,
            outbox=outbox,
            vault=vault,
            watches=watches,
            sessions=sessions,
            usage=UsageReports(UsageReportRepository(self._pool)),
            steps=Steps(StepRepository(hot), self.registry),
            schedules=schedules,
            signals=Signals(
                SignalRepository(self._pool), publisher, max_per_job=s.max_signals_per_job
            ),
        )
        loops = Supervisor(
            [
                ("outbox dispatcher", dispatcher),
                ("schedule firing", ScheduleFiring(schedules)),
                (
                    "dependency resolver",
                    Periodic(
                        "dependency resolver",
                        DependencyResolver(dependency_store, dispatcher).resolve,
                        interval_s=RESOLVE_INTERVAL_S,
                        batch=RESOLVE_BATCH,
                    ),
                ),
                *housekeeping(
                    s,
                    self.registry,
                    self._pool,
                    leases=leases,
                    outbox=outbox,
                    jobs=jobs,
                    watches=watches,
                    queues=queues,
                    schedules=schedules,
                ),
            ],
            stopped=self._stopped,
        )
        return server, loops

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


async def _page_token_secret(s: JobServiceSettings, listing: JobListing) -> bytes:
    if s.page_token_secret:
        return s.page_token_secret.encode()
    secret = await listing.page_token_secret()
    if secret is None:
        raise RuntimeError("no page token secret: run `python -m job_service migrate` first")
    return secret
