"""A new job in SQL: the columns it brings, its record, its keys, what its user spent today,
and its rows — the job, its snapshot, its first timeline event and its dispatch row — as
the CTEs every producer of new jobs uses (CreateJob's and CreateJobs' statements, a
projected child, a re-run), so that each producer writes the same rows the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from job_service.adapters.postgres.rows import JOB_COLUMNS
from job_service.adapters.postgres.vocabulary.outbox_rows import dispatch_key, dispatch_rows
from job_service.adapters.postgres.vocabulary.statuses import sql_status, timeline_event
from job_service.domain.jobs import NewJob
from job_service.domain.lifecycle import ACTIVE, JobStatus, statuses_sql

# The columns of `jobs` a new job (CreateJob's, or a projection's child) brings, with their
# SQL types: CreateJob binds them by name, a projection's children as a record. A new column
# is one line here (and a field of NewJob).
NEW_JOB_COLUMNS = {
    # made by NewJob (a sealed snapshot is bound to it before the insert)
    "id": "uuid",
    "user_id": "varchar",
    "job_type": "varchar",
    "queue": "varchar",
    "priority": "smallint",
    "idempotency_key": "varchar",
    "request_hash": "varchar",
    "max_attempts": "int",
    "timeout_ms": "int",
    "input_schema_version": "varchar",
    "output_schema_version": "varchar",
    "definition_version": "varchar",
    "prompt_key": "varchar",
    "prompt_version": "varchar",
    "model_tier": "varchar",
    "credential_mode": "varchar",
    "credential_id": "uuid",
    # scheduling: a user-scoped key of a child reads "{user}" until its parent's user fills it
    "fairness_key": "varchar",
    "concurrency_key": "varchar",
    "concurrency_limit": "int",
    "next_run_at": "timestamptz",
    "target_type": "varchar",
    "target_id": "varchar",
    "created_by": "varchar",
    # the schedule and slot a schedule's job was created for (ScheduleService)
    "schedule_id": "uuid",
    "scheduled_for": "timestamptz",
    # CreateJob's deadline, or the type's default from when it is due (issue 45)
    "deadline_at": "timestamptz",
}
# What a new job brings beyond its row: the snapshot.
SNAPSHOT_FIELDS = {
    "snapshot": "jsonb",
    "snapshot_hash": "varchar",
    "snapshot_ttl_s": "float8",
    "redaction_version": "varchar",
}
KEY_COLUMNS = ("fairness_key", "concurrency_key")


def record_type(columns: dict[str, str]) -> str:
    """The column definition list of ``jsonb_to_record(set)``."""
    return ", ".join(f"{name} {sql_type}" for name, sql_type in columns.items())


def new_job_record(new: NewJob, names: dict[str, str]) -> dict[str, Any]:
    """The NewJob fields ``names`` lists, by name."""
    return {name: getattr(new, name) for name in names}


def record_values(src: str) -> dict[str, str]:
    """Each new-job column, valued from the same-named column of ``src``."""
    return {column: f"{src}.{column}" for column in NEW_JOB_COLUMNS}


def user_keys(src: str) -> str:
    """The fairness and concurrency keys of ``src`` with a "{user}" placeholder filled."""
    return ", ".join(
        f"replace({src}.{key}, '{{user}}', {src}.user_id) AS {key}" for key in KEY_COLUMNS
    )


def queued_or_created(src: str) -> str:
    """The status a new job of ``src`` starts in: queued, or created when it is to run
    later (``next_run_at``)."""
    queued, created = sql_status(JobStatus.QUEUED), sql_status(JobStatus.CREATED)
    return f"CASE WHEN {src}.next_run_at IS NULL THEN {queued} ELSE {created} END"


_MIDNIGHT = "(date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')"


def spent_today(user: str, budget: str) -> str:
    """What user ``user`` (SQL) spent on provider calls today (UTC), in US dollars; 0 without
    a ``budget`` (SQL; 0 is off), so that the budget costs nothing while it is off. The
    calls of its jobs still stored — only unfinished jobs and jobs finished today can have
    calls today, each found on an index — plus today's calls of jobs retention already
    deleted (usage_daily)."""
    return f"""CASE WHEN {budget} > 0 THEN
        (SELECT coalesce(sum(spend.cost_usd), 0) FROM usage_logs spend
         WHERE spend.created_at >= {_MIDNIGHT} AND spend.job_id IN (
             SELECT id FROM jobs WHERE user_id = {user} AND status IN {statuses_sql(ACTIVE)}
             UNION ALL
             SELECT id FROM jobs WHERE user_id = {user} AND finished_at >= {_MIDNIGHT}))
        + (SELECT coalesce(sum(cost_usd), 0) FROM usage_daily
           WHERE user_id = {user} AND day = (now() AT TIME ZONE 'UTC')::date)
        ELSE 0 END"""


def snapshot_values(src: str) -> str:
    """A new job's snapshot from ``src`` (with SNAPSHOT_FIELDS and input_schema_version):
    payload, content hash, schema version, expiry and redaction version."""
    return (
        f"{src}.snapshot, {src}.snapshot_hash, {src}.input_schema_version,\n           "
        f"now() + {src}.snapshot_ttl_s * interval '1 second', {src}.redaction_version"
    )


def snapshot_row(job_id: str, values: str, source: str) -> str:
    """Inserts the snapshot (its input, kept for re-runs) of each new job ``job_id``:
    ``values`` as ``snapshot_values`` gives them, over ``source`` (a FROM clause)."""
    return f"""INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version, expires_at,
                               redaction_version)
    SELECT {job_id}, {values}
    {source}"""


class NewJobCtes(NamedTuple):
    """The names of the CTEs ``new_job_rows`` writes."""

    jobs: str = "inserted"
    snapshots: str = "snapshot"
    events: str = "event"
    dispatch: str = "dispatch"


# The names CreateJob, CreateJobs and a re-run use: inserted, snapshot, event, dispatch.
INSERTED = NewJobCtes()


_IDEMPOTENT = """
    ON CONFLICT (user_id, job_type, idempotency_key) WHERE idempotency_key IS NOT NULL
        DO NOTHING"""


def new_job_rows(
    values: Mapping[str, str],
    source: str,
    *,
    snapshot: str,
    status: JobStatus | str,
    trace: str,
    owner: str | None = None,
    due: str = "now()",
    reason: str | None = None,
    returning: str = JOB_COLUMNS,
    idempotent: bool = True,
    ctes: NewJobCtes = INSERTED,
) -> str:
    """The CTEs (from the first one's name to the last one's closing parenthesis) that store
    new jobs with the rows every new job brings:

    - ``ctes.jobs``: a job per row of ``source`` (its FROM, and any WHERE or ORDER BY),
      ``values`` mapping each column to its SQL value, returning ``returning``; when
      ``idempotent``, a job whose idempotency key names a job already is left out (ON
      CONFLICT waits for a concurrent writer of the key to commit);
    - ``ctes.snapshots``: its snapshot (``snapshot``: a ``snapshot_row``);
    - ``ctes.events``: its first timeline event, to ``status`` (the status the jobs start
      in, or the inserted rows' column), with ``reason`` (SQL) when given;
    - ``ctes.dispatch``: its dispatch row (dedupe key ``…:create``), available at ``due``
      (SQL over the inserted rows as ``src``), with ``trace`` and ``owner`` as for
      ``dispatch_rows``.
    """
    job_id = "id::uuid" if returning == JOB_COLUMNS else "id"  # JOB_COLUMNS: the id as text
    first_event = timeline_event(
        ctes.jobs,
        None,
        status,
        job_id=job_id,
        attempt="0",
        **({} if reason is None else {"reason": reason}),
    )
    dispatch = dispatch_rows(
        ctes.jobs, dispatch_key("src.id", "create"), available_at=due, trace=trace, owner=owner
    )
    return f"""{ctes.jobs} AS (
    INSERT INTO jobs AS j ({_wrapped(values, " " * 27)})
    SELECT {_wrapped(values.values(), " " * 11)}
    {source}{_IDEMPOTENT if idempotent else ""}
    RETURNING {returning}
), {ctes.snapshots} AS (
    {snapshot}
), {ctes.events} AS (
    {first_event}
), {ctes.dispatch} AS (
    {dispatch}
)"""


def _wrapped(items: Iterable[str], indent: str, width: int = 92) -> str:
    """``items`` listed with commas, in lines of about ``width`` characters (statements.sql
    is read whole)."""
    lines = [""]
    for item in items:
        if lines[-1] and len(indent) + len(lines[-1]) + len(item) > width:
            lines[-1] += ","
            lines.append(item)
        else:
            lines[-1] += f", {item}" if lines[-1] else item
    return f"\n{indent}".join(lines)


# The job an idempotency key names: $1 user, $2 job type, $3 key.
FIND_BY_IDEMPOTENCY_KEY = f"""
SELECT {JOB_COLUMNS} FROM jobs j
WHERE j.user_id = $1 AND j.job_type = $2 AND j.idempotency_key = $3
"""
