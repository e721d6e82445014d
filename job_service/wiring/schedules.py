"""Schedules: the recurring jobs, created through the new-jobs use case when they fire."""

from __future__ import annotations

from job_service.adapters.postgres.schedules import ScheduleRepository
from job_service.domain.paging import PageTokens
from job_service.usecases.schedules import Schedules
from job_service.wiring.connections import Connections
from job_service.wiring.jobs import JobsWiring


def wire_schedules(c: Connections, jobs: JobsWiring, page_tokens: PageTokens) -> Schedules:
    rounds = c.settings.db_statement_timeout_s
    schedule_store = ScheduleRepository(c.pool, round_statement_timeout_s=rounds)
    return Schedules(jobs.new_jobs, jobs.jobs, schedule_store, page_tokens, c.sealer)
