"""A job as the postgres adapters select it and map it: one column list, one mapping (and
the timeline events and signals GET_JOB aggregates with it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from job_service.domain.jobs import Artifact, DurableStep, Job, JobEvent
from job_service.domain.lifecycle import JobStatus, statuses_sql
from job_service.domain.signals import ReceivedSignal
from shared.credentials import CredentialMode

JOB_COLUMNS = """
    j.id::text AS id, j.user_id, j.job_type, j.status, j.queue, j.priority, j.attempt_count,
    j.max_attempts, j.idempotency_key, j.request_hash, j.progress, j.validated_output,
    j.output_hash, j.error_code, j.public_error_message, j.internal_error_message,
    j.created_at, j.updated_at, j.started_at, j.finished_at, j.next_run_at,
    j.parent_job_id::text AS parent_job_id, j.prompt_key, j.prompt_version, j.model_tier,
    j.trigger_type, j.retried_from_job_id::text AS retried_from_job_id,
    j.credential_mode, j.credential_id::text AS credential_id, j.definition_version,
    j.concurrency_key, j.target_type, j.target_id, j.output_schema_version,
    j.model_provider, j.model_name, j.created_by,
    j.schedule_id::text AS schedule_id, j.scheduled_for, j.locked_by AS worker_id,
    j.deadline_at
"""


# Where a job's step sets its error: an attempt's failure (retrying, failed) or a cancel.
ERROR_ENDS = frozenset({JobStatus.RETRYING, JobStatus.FAILED, JobStatus.CANCELLED})

# The attempt a job's error is of: that of its newest step into one of ERROR_ENDS (one
# probe of job_events' job index, made only for a job with an error). For GET_JOB and the
# listings, beside JOB_COLUMNS.
ERROR_ATTEMPT = f"""
    (SELECT e.attempt FROM job_events e
     WHERE j.error_code IS NOT NULL AND e.job_id = j.id
       AND e.to_status IN {statuses_sql(ERROR_ENDS)}
     ORDER BY e.id DESC LIMIT 1) AS error_attempt
"""


def job_from_row(
    row: asyncpg.Record,
    artifacts: list[Artifact] | None = None,
    events: list[JobEvent] | None = None,
) -> Job:
    """A job from a row selected with JOB_COLUMNS."""
    return Job(
        id=row["id"],
        user_id=row["user_id"],
        job_type=row["job_type"],
        status=JobStatus(row["status"]),
        queue=row["queue"],
        priority=row["priority"],
        attempt_count=row["attempt_count"],
        max_attempts=row["max_attempts"],
        idempotency_key=row["idempotency_key"],
        request_hash=row["request_hash"],
        progress=row["progress"],
        validated_output=row["validated_output"],
        output_hash=row["output_hash"],
        error_code=row["error_code"],
        public_error_message=row["public_error_message"],
        internal_error_message=row["internal_error_message"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        next_run_at=row["next_run_at"],
        artifacts=artifacts or [],
        events=events or [],
        parent_job_id=row["parent_job_id"],
        prompt_key=row["prompt_key"],
        prompt_version=row["prompt_version"],
        model_tier=row["model_tier"],
        trigger=row["trigger_type"],
        retried_from_job_id=row["retried_from_job_id"],
        credential_mode=CredentialMode(row["credential_mode"]),
        credential_id=row["credential_id"],
        definition_version=row["definition_version"],
        concurrency_key=row["concurrency_key"],
        target_type=row["target_type"],
        target_id=row["target_id"],
        output_schema_version=row["output_schema_version"],
        model_provider=row["model_provider"],
        model_name=row["model_name"],
        created_by=row["created_by"],
        schedule_id=row["schedule_id"],
        scheduled_for=row["scheduled_for"],
        worker_id=row["worker_id"],
        error_attempt=row.get("error_attempt") or 0,
        deadline_at=row["deadline_at"],
    )


def event_from_json(raw: dict[str, Any]) -> JobEvent:
    """A timeline event as GET_JOB aggregates it into jsonb."""
    return JobEvent(
        from_status=JobStatus(raw["from"]) if raw["from"] else None,
        to_status=JobStatus(raw["to"]),
        attempt=raw["attempt"],
        reason=raw["reason"],
        at=datetime.fromisoformat(raw["at"]),
        worker_id=raw.get("worker"),
    )


def step_from_json(raw: dict[str, Any]) -> DurableStep:
    """A durable step as GET_JOB aggregates it into jsonb."""
    return DurableStep(
        raw["ordinal"],
        raw["name"],
        raw["attempt"],
        datetime.fromisoformat(raw["recorded_at"]),
        raw["error_code"],
    )


def signal_from_json(raw: dict[str, Any]) -> ReceivedSignal:
    """A received signal as GET_JOB aggregates it into jsonb."""
    return ReceivedSignal(raw["seq"], raw["name"], datetime.fromisoformat(raw["sent_at"]))
