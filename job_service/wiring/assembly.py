"""The concerns joined: each concern's wiring in the order they depend on one another, then
the gRPC server over their use cases and the loops that run beside it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health

from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.server import build_server
from job_service.adapters.nats_partials import NatsPartialOutputFeed
from job_service.adapters.postgres.console_sessions import ConsoleSessionRepository
from job_service.adapters.postgres.credentials import CredentialRepository
from job_service.adapters.postgres.job_deadlines import DeadlineRepository
from job_service.adapters.postgres.signals import SignalRepository
from job_service.adapters.postgres.steps import StepRepository
from job_service.adapters.postgres.usage_reports import UsageReportRepository
from job_service.loops import Loop, Supervisor, housekeeping
from job_service.periodic import Periodic
from job_service.usecases.console_sessions import ConsoleSessions
from job_service.usecases.credentials import CredentialVault
from job_service.usecases.dependencies import (
    RESOLVE_BATCH,
    RESOLVE_INTERVAL_S,
    DependencyResolver,
    DependencyResults,
)
from job_service.usecases.firing import ScheduleFiring
from job_service.usecases.job_deadlines import DEADLINE_BATCH, JobDeadlines
from job_service.usecases.schedules import Schedules
from job_service.usecases.sessions import WorkerSessions
from job_service.usecases.signals import Signals
from job_service.usecases.steps import Steps
from job_service.usecases.usage import UsageReports
from job_service.usecases.watch import WatchHub
from job_service.wiring.admin import AdminWiring, wire_admin
from job_service.wiring.connections import Connections
from job_service.wiring.delivery import Delivery, wire_delivery
from job_service.wiring.jobs import JobsWiring, wire_jobs
from job_service.wiring.rate_limits import RateLimitsWiring, wire_rate_limits
from job_service.wiring.schedules import wire_schedules
from job_service.wiring.sealing import sealing_loops
from job_service.wiring.work import WorkWiring, wire_work


@dataclass(frozen=True)
class Wired:
    """What the process serves and runs, and what its shutdown closes first (the watch
    streams and the worker sessions would otherwise hold the grace period)."""

    server: grpc.aio.Server
    loops: Supervisor
    watches: WatchHub
    sessions: WorkerSessions


@dataclass(frozen=True)
class _Concerns:
    delivery: Delivery
    jobs: JobsWiring
    limits: RateLimitsWiring
    work: WorkWiring
    admin: AdminWiring
    schedules: Schedules
    watches: WatchHub


async def wire(
    c: Connections,
    tokens: TokenTable,
    credentials: CredentialRepository,
    vault: CredentialVault,
    health_servicer: health.aio.HealthServicer,
    stopped: asyncio.Event,
) -> Wired:
    """The adapters into the use cases, and those into the server and the loops; a loop
    that ends sets ``stopped``."""
    concerns = await _wire_concerns(c, credentials)
    server = _build_server(c, concerns, tokens, vault, health_servicer)
    loops = Supervisor(_loops(c, concerns), stopped=stopped)
    return Wired(server, loops, concerns.watches, concerns.work.sessions)


async def _wire_concerns(c: Connections, credentials: CredentialRepository) -> _Concerns:
    delivery = wire_delivery(c)
    jobs = wire_jobs(c, delivery, credentials)
    limits = await wire_rate_limits(c)
    work = wire_work(c, delivery, limits)
    admin = await wire_admin(c, delivery, jobs)
    schedules = wire_schedules(c, jobs, admin.page_tokens)
    watches = WatchHub(admin.listing, NatsPartialOutputFeed(c.nc), c.registry)
    return _Concerns(delivery, jobs, limits, work, admin, schedules, watches)


def _build_server(
    c: Connections,
    concerns: _Concerns,
    tokens: TokenTable,
    vault: CredentialVault,
    health_servicer: health.aio.HealthServicer,
) -> grpc.aio.Server:
    s, jobs, work, admin = c.settings, concerns.jobs, concerns.work, concerns.admin
    return build_server(
        s,
        c.declared,
        tokens,
        health_servicer,
        new_jobs=jobs.new_jobs,
        jobs=jobs.jobs,
        leases=work.leases,
        results=work.results,
        grants=work.grants,
        permits=concerns.limits.permits,
        dependencies=DependencyResults(jobs.dependency_store, c.sealer),
        queues=work.queues,
        admin=admin.admin,
        console_sessions=ConsoleSessions(ConsoleSessionRepository(c.pool)),
        bulk=admin.bulk,
        erasure=admin.erasure,
        outbox=concerns.delivery.outbox,
        vault=vault,
        watches=concerns.watches,
        sessions=work.sessions,
        usage=UsageReports(UsageReportRepository(c.pool)),
        steps=Steps(StepRepository(c.hot), c.registry, c.sealer),
        schedules=concerns.schedules,
        signals=Signals(
            SignalRepository(c.pool),
            concerns.delivery.publisher,
            max_per_job=s.max_signals_per_job,
            sealer=c.sealer,
            wake_dispatcher=concerns.delivery.dispatcher.wake,
        ),
    )


def _loops(c: Connections, concerns: _Concerns) -> list[tuple[str, Loop]]:
    dispatcher = concerns.delivery.dispatcher
    return [
        ("outbox dispatcher", dispatcher),
        ("schedule firing", ScheduleFiring(concerns.schedules)),
        (
            "dependency resolver",
            Periodic(
                "dependency resolver",
                DependencyResolver(concerns.jobs.dependency_store, dispatcher).resolve,
                interval_s=RESOLVE_INTERVAL_S,
                batch=RESOLVE_BATCH,
            ),
        ),
        (
            "deadline keeper",
            Periodic(
                "deadline keeper",
                JobDeadlines(
                    DeadlineRepository(c.pool), concerns.delivery.publisher, dispatcher
                ).end_passed,
                interval_s=c.settings.deadline_interval_s,
                batch=DEADLINE_BATCH,
            ),
        ),
        *housekeeping(
            c.settings,
            c.declared,
            c.pool,
            leases=concerns.work.leases,
            outbox=concerns.delivery.outbox,
            jobs=concerns.jobs.jobs,
            watches=concerns.watches,
            queues=concerns.work.queues,
            schedules=concerns.schedules,
        ),
        *sealing_loops(c),
    ]
