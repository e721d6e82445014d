"""Work: how a job reaches a worker and comes back. Queues and claims choose, leases hold,
grants hand over (for work tokens, pushed down a session, with results), results end an
attempt; worker sessions watch the workers."""

from __future__ import annotations

from dataclasses import dataclass

from job_service.adapters.postgres.claims import ClaimRepository
from job_service.adapters.postgres.leases import AttemptTransaction, LeaseRepository
from job_service.adapters.postgres.queues import QueueRepository
from job_service.adapters.postgres.results import ResultRepository
from job_service.adapters.postgres.sessions import SessionRepository
from job_service.adapters.postgres.steps import StepRepository
from job_service.usecases.claims import Claims
from job_service.usecases.grants import Grants
from job_service.usecases.known_jobs import KnownJobs
from job_service.usecases.leases import Leases
from job_service.usecases.queues import Queues
from job_service.usecases.results import Results
from job_service.usecases.sessions import WorkerSessions
from job_service.usecases.waiting_workers import WaitingWorkers
from job_service.wiring.connections import Connections
from job_service.wiring.delivery import Delivery
from job_service.wiring.rate_limits import RateLimitsWiring


@dataclass(frozen=True)
class WorkWiring:
    leases: Leases
    sessions: WorkerSessions
    queues: Queues
    results: Results
    grants: Grants


def wire_work(c: Connections, delivery: Delivery, limits: RateLimitsWiring) -> WorkWiring:
    s, registry, dispatcher = c.settings, c.registry, delivery.dispatcher
    leases = Leases(
        registry,
        LeaseRepository(c.hot, lease_ttl_s=s.lease_ttl_s),
        dispatcher,
        limits.reservations,
        c.sealer,
    )
    sessions = WorkerSessions(
        SessionRepository(c.pool, AttemptTransaction),
        leases,
        instance_id=c.instance_id,
        grace_s=s.worker_disconnect_grace_s,
        reconnect_grace_s=s.worker_reconnect_grace_s or None,
        ping_interval_s=s.worker_session_ping_interval_s,
    )
    known = KnownJobs()  # what a grant read and its job's submit needs
    claims = Claims(
        registry,
        ClaimRepository(c.hot, lease_ttl_s=s.lease_ttl_s),
        limits.rates,
        limits.budgets,
        queue_limits=s.queue_limits(),
        known=known,
    )
    queues = Queues(registry, QueueRepository(c.pool, s.queue_limits()), limits.rates)
    results = Results(
        registry,
        ResultRepository(c.hot, dispatcher.owner),
        leases,
        dispatcher,
        limits.reservations,
        refresh=c.declared.load,
        sealer=c.sealer,
        known=known,
    )
    waiting = WaitingWorkers() if s.push_grants else None
    grants = Grants(claims, leases, StepRepository(c.hot), waiting, sealer=c.sealer)
    dispatcher.push_grants_with(grants.push if waiting is not None else None)
    return WorkWiring(leases, sessions, queues, results, grants)
