"""Statuses in SQL, from the lifecycle (``job_service.domain.lifecycle``): a status a
statement writes or compares is ``sql_status(JobStatus.X)``, a set is ``statuses_sql(SET)``,
never a hand-written literal; the timeline event that records a change of status, and the
pieces of a set-based cancel."""

from __future__ import annotations

from job_service.adapters.postgres.vocabulary.outbox_rows import domain_event_rows
from job_service.domain.lifecycle import (
    LOCKABLE,
    JobStatus,
    Step,
    sources,
    statuses_sql,
    transition,
)

__all__ = [
    "CANCEL_STEP",
    "WAITING",
    "cancelled_events",
    "sql_status",
    "statuses_sql",
    "timeline_event",
]


def sql_status(status: JobStatus) -> str:
    """A status as an SQL literal: ``'running'``."""
    return f"'{status.value}'"


# Waiting: a worker may be granted the job once it is due (created, queued, retrying).
WAITING = statuses_sql(LOCKABLE)

# CancelJob's step as a JSON map from status to status, for set-based cancels.
CANCEL_STEP = {s.value: transition(s, Step.CANCEL).value for s in sources(Step.CANCEL)}


def cancelled_events(changed: str) -> str:
    """Inserts the domain events of the jobs of ``changed`` (a CTE) that a cancel moved to
    cancelled (a running job's cancel is only requested: its event comes when it ends)."""
    cancelled = sql_status(JobStatus.CANCELLED)
    return domain_event_rows(f"(SELECT * FROM {changed} WHERE status = {cancelled})")


def timeline_event(
    src: str,
    from_status: JobStatus | str | None,
    to_status: JobStatus | str,
    *,
    job_id: str = "id",
    attempt: str = "attempt_count",
    **more: str,
) -> str:
    """Inserts a timeline event (``job_events``) for each row of ``src`` (a FROM list): the
    job ``job_id`` moved from ``from_status`` (None: it is new) to ``to_status`` in attempt
    ``attempt``. A status is a JobStatus, or an SQL expression (a column, a parameter) when
    the rows differ; ``more`` are further columns (reason, worker_id, ...) and their SQL
    values, in order."""
    columns = ", ".join(["job_id", "from_status", "to_status", "attempt", *more])
    values = ", ".join([job_id, _status(from_status), _status(to_status), attempt, *more.values()])
    return f"""INSERT INTO job_events ({columns})
    SELECT {values} FROM {src}"""


def _status(status: JobStatus | str | None) -> str:
    if status is None:
        return "NULL"
    return sql_status(status) if isinstance(status, JobStatus) else status
