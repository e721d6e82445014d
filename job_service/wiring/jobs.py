"""Jobs: creating them (admission, the quota gate, batches), reading and cancelling them, and
the dependencies between them."""

from __future__ import annotations

from dataclasses import dataclass

from job_service.adapters.postgres.batches import BatchRepository
from job_service.adapters.postgres.credentials import CredentialRepository
from job_service.adapters.postgres.dependencies import DependencyRepository
from job_service.adapters.postgres.jobs import JobRepository
from job_service.adapters.postgres.new_jobs import NewJobRepository
from job_service.domain.quotas import Quotas
from job_service.usecases.jobs import Jobs
from job_service.usecases.new_jobs import NewJobs
from job_service.wiring.connections import Connections
from job_service.wiring.delivery import Delivery


@dataclass(frozen=True)
class JobsWiring:
    job_store: JobRepository
    jobs: Jobs
    new_jobs: NewJobs
    dependency_store: DependencyRepository


def wire_jobs(c: Connections, delivery: Delivery, credentials: CredentialRepository) -> JobsWiring:
    s, dispatcher = c.settings, delivery.dispatcher
    job_store = JobRepository(c.hot)
    jobs = Jobs(c.registry, job_store, delivery.publisher, dispatcher, sealer=c.sealer)
    new_job_store = NewJobRepository(c.hot, dispatcher.owner)
    new_jobs = NewJobs(
        c.registry,
        new_job_store,
        BatchRepository(c.hot, dispatcher.owner),
        credentials,
        dispatcher,
        dispatcher,
        Quotas(
            max_active=s.max_active_jobs_per_user,
            daily=s.daily_job_quota_per_user,
            daily_cost_usd=s.daily_cost_budget_usd_per_user,
        ),
        refresh=c.declared.load,
        sealer=c.sealer,
    )
    return JobsWiring(job_store, jobs, new_jobs, DependencyRepository(c.hot))
