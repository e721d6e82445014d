"""The schema, as SQLAlchemy Core tables: the single description Alembic migrations are
checked against (tests/integration/test_migrations.py), one module per concern, every table
in ``metadata``. Queries live in the postgres adapter of their concern."""

from __future__ import annotations

from job_service.adapters.postgres.tables.base import metadata
from job_service.adapters.postgres.tables.console import console_sessions
from job_service.adapters.postgres.tables.credentials import api_secrets, credentials
from job_service.adapters.postgres.tables.data_keys import user_data_keys
from job_service.adapters.postgres.tables.dependencies import job_dependencies
from job_service.adapters.postgres.tables.job_types import job_type_specs
from job_service.adapters.postgres.tables.jobs import (
    job_artifacts,
    job_events,
    job_signals,
    job_snapshots,
    job_step_results,
    job_steps,
    jobs,
)
from job_service.adapters.postgres.tables.limits import call_permits, queue_controls, rate_limits
from job_service.adapters.postgres.tables.outbox import outbox_events
from job_service.adapters.postgres.tables.schedules import schedule_runs, schedules
from job_service.adapters.postgres.tables.usage import (
    job_quota_usage,
    usage_daily,
    usage_daily_job_types,
    usage_logs,
)
from job_service.adapters.postgres.tables.workers import worker_definitions, worker_sessions

__all__ = [
    "api_secrets",
    "call_permits",
    "console_sessions",
    "credentials",
    "job_artifacts",
    "job_dependencies",
    "job_events",
    "job_quota_usage",
    "job_signals",
    "job_snapshots",
    "job_step_results",
    "job_steps",
    "job_type_specs",
    "jobs",
    "metadata",
    "outbox_events",
    "queue_controls",
    "rate_limits",
    "schedule_runs",
    "schedules",
    "usage_daily",
    "usage_daily_job_types",
    "usage_logs",
    "user_data_keys",
    "worker_definitions",
    "worker_sessions",
]
