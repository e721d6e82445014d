"""Re-runs on PostgreSQL (the admin's RetryJob, and RetryJobs per job): a new job from a
failed or cancelled job's snapshot, held to one live retry per original job.

A retry belongs to the lineage of the first job it descends from (``retry_root_id``: a
retry of a retry keeps its source's original). A lineage has at most one live retry
(waiting, running or succeeded) — the partial unique index ``jobs_one_live_retry`` holds
it whoever retries (two replicas, RetryJob and RetryJobs at once); the check before the
insert only names the live retry in the refusal. An admin RetryJob's idempotency key
(``retry_key``, unique) names the retry it made, for good.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from job_service.adapters.postgres.rows import JOB_COLUMNS, job_from_row
from job_service.adapters.postgres.units import attach, attach_retrying_on
from job_service.adapters.postgres.vocabulary.dependencies import MOVE_WAITING
from job_service.adapters.postgres.vocabulary.line import LOCK_RERUN_LINE, place_in_line
from job_service.adapters.postgres.vocabulary.new_job import new_job_rows, snapshot_row
from job_service.adapters.postgres.vocabulary.statuses import sql_status
from job_service.domain.dependencies import UNTIL_DEPENDENCIES_END
from job_service.domain.ids import new_job_id
from job_service.domain.jobs import Job, RetrySpec
from job_service.domain.lifecycle import RERUNNABLE, JobStatus, status_values
from shared.dependencies import DependencyPolicy
from shared.errors import IdempotencyKeyReused, JobNotRetryable, LiveChildExists, LiveRetryExists

_ONE_LIVE_RETRY = "jobs_one_live_retry"


class _Made(NamedTuple):
    """What the caller made for the re-run: its id, and its sealed input (or None)."""

    id: str
    snapshot: Any


def _same(*columns: str) -> dict[str, str]:
    return {column: column for column in columns}


# A re-run's row: its source's (``src``) but for its trigger, status, place in line and
# what the job type's definition says today ($3..$5).
_RERUN = {
    # made by the caller: its input's copy is sealed for it ($10)
    "id": "$10::uuid",
    **_same("user_id", "job_type"),
    "trigger_type": "'retry'",
    **_same("queue", "priority", "request_hash"),
    "retried_from_job_id": "id",
    "parent_job_id": "parent_job_id",
    # a re-run of a job with dependencies waits for them again (attached by ``_rerun``)
    "status": f"CASE WHEN dependency_policy IS NULL THEN {sql_status(JobStatus.QUEUED)}"
    f" ELSE {sql_status(JobStatus.CREATED)} END",
    "next_run_at": "CASE WHEN dependency_policy IS NOT NULL THEN $9::timestamptz END",
    "max_attempts": "$3::int",
    "timeout_ms": "$4::int",
    **_same("input_schema_version", "output_schema_version"),
    "definition_version": "$5::varchar",
    "queued_at": "now()",
    **_same("credential_mode", "credential_id", "prompt_key", "prompt_version", "model_tier"),
    "fairness_key": "coalesce(fairness_key, user_id)",
    **_same("concurrency_key", "concurrency_limit"),
    "sched_key": place_in_line("src"),
    **_same("target_type", "target_id"),
    "retry_root_id": "coalesce(retry_root_id, id)",
    "retry_key": "$8::varchar",
    # its type's default deadline from now ($12 seconds; NULL: none): a deadline the source
    # was given is not the re-run's, which an operator starts after it
    "deadline_at": "now() + $12::float8 * interval '1 second'",
}

# A re-run's snapshot: its source's (or $11, the source's sealed for the re-run), kept for
# $6 seconds.
_RERUN_SNAPSHOT = (
    "coalesce($11::jsonb, src.payload), src.content_hash, src.schema_version,\n           "
    "now() + $6 * interval '1 second', src.redaction_version"
)

# A new job from a finished one's snapshot ($1, in a status of $2), trigger "retry". A
# retried child stays its parent's child (GetJob's child_job_ids, the cancel cascade); it
# has no idempotency key: the original child keeps it, so a re-run parent projection still
# finds the original and creates nothing. Its original is its source's original (or the
# source itself); $8 is the admin's retry key, or NULL.
RERUN_JOB = f"""
WITH src AS (
    SELECT j.*, s.payload, s.content_hash, s.schema_version, s.redaction_version
    FROM jobs j JOIN job_snapshots s ON s.job_id = j.id
    WHERE j.id = $1 AND j.status = ANY($2::text[])
), {
    new_job_rows(
        _RERUN,
        "FROM src",
        snapshot=snapshot_row("inserted.id::uuid", _RERUN_SNAPSHOT, "FROM inserted, src"),
        status="status",
        reason="$7::varchar",
        trace="NULL::jsonb",
        due="coalesce(src.next_run_at, now())",
        idempotent=False,
    )
}
SELECT * FROM inserted
"""

RERUN_SOURCE = """
SELECT parent_job_id::text AS parent_job_id, job_type, coalesce(retry_root_id, id) AS root,
       user_id, dependency_policy
FROM jobs WHERE id = $1
"""

# What a re-run of job $1 waits for: the newest run of each of its dependencies (the
# dependency, or its newest re-run).
LATEST_RUNS = """
SELECT coalesce(
    (SELECT r.id::text FROM jobs r WHERE r.retry_root_id = coalesce(d.retry_root_id, d.id)
     ORDER BY r.created_at DESC LIMIT 1),
    e.depends_on_id::text) AS id
FROM job_dependencies e LEFT JOIN jobs d ON d.id = e.depends_on_id
WHERE e.job_id = $1
"""

# The original of job $1's lineage.
RERUN_ROOT = "SELECT coalesce(retry_root_id, id) FROM jobs WHERE id = $1"

# Serialises RetryJob of one parent's children (and the parent's own cancel, which locks the
# same row): the sibling check that follows, a statement of its own, sees every child a
# concurrent retry committed before the lock was granted.
LOCK_PARENT = "SELECT status FROM jobs WHERE id = $1 FOR UPDATE"

# A child of parent $1 and type $2 other than $3 that is unfinished or succeeded.
LIVE_SIBLING = """
SELECT id::text FROM jobs
WHERE parent_job_id = $1 AND job_type = $2 AND id <> $3 AND status <> ALL($4::text[])
ORDER BY created_at DESC LIMIT 1
"""


# The input a re-run of $1 copies: its snapshot.
RERUN_INPUT = "SELECT payload FROM job_snapshots WHERE job_id = $1"

# A parent in one of these has cancelled (or is cancelling) its unfinished children.
CANCELLING = (JobStatus.CANCEL_REQUESTED.value, JobStatus.CANCELLED.value)


# A retry of original $1 that is live (in no status of $2), or made at or after $3 (NULL:
# none): the newest.
LINEAGE_RETRY = """
SELECT id::text AS id, status FROM jobs
WHERE retry_root_id = $1 AND (status <> ALL($2::text[]) OR created_at >= $3)
ORDER BY created_at DESC LIMIT 1
"""

# The retry an admin RetryJob's idempotency key names, and the job it retried.
RETRY_BY_KEY = f"SELECT {JOB_COLUMNS} FROM jobs j WHERE j.retry_key = $1"


class RerunRepository:
    """Re-runs of finished jobs from their snapshots, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def rerun_input(self, job_id: str) -> dict[str, Any] | None:
        """The input a re-run of the job would copy (its snapshot), or None when gone."""
        stored: dict[str, Any] | None = await self._pool.fetchval(RERUN_INPUT, job_id)
        return stored

    async def rerun(
        self,
        job_id: str,
        spec: RetrySpec,
        reason: str = "retry",
        *,
        key: str | None = None,
        since: datetime | None = None,
        new_id: str | None = None,
        snapshot: Any = None,
    ) -> tuple[Job, bool] | None:
        """A new job from a failed or cancelled job's snapshot, ``reason`` on its first
        timeline event, and whether this call made it (False: the retry ``key`` already
        names); None when that job is not (or no longer) failed or cancelled, or its
        snapshot is gone. ``new_id``: the re-run's id (made here when None); ``snapshot``:
        its copy of the input, sealed for it (None: the source's as it is stored).

        Refused: ``key`` naming the retry of another job (IdempotencyKeyReused); the
        job's original having a live retry, or one made at or after ``since``
        (LiveRetryExists); a child whose parent has another live child of its type
        (LiveChildExists) or was cancelled (JobNotRetryable)."""
        async with self._pool.acquire() as conn:
            if key is not None and (known := await _keyed(conn, key, job_id)) is not None:
                return known, False
            try:
                made = _Made(new_id or new_job_id(), snapshot)
                row = await _rerun_retrying(conn, job_id, spec, reason, key, since, made)
            except (asyncpg.UniqueViolationError, LiveRetryExists) as error:
                # A concurrent retry committed first: answer as if it had come before. The
                # same key's retry may have committed since the key was looked up (the
                # lineage check then finds it live, or the insert collides on either
                # index), so the key is looked up again first.
                if key is not None and (known := await _keyed(conn, key, job_id)) is not None:
                    return known, False
                raise await _refusal(conn, job_id, error) from None
        return None if row is None else (job_from_row(row), True)


async def _keyed(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], key: str, job_id: str
) -> Job | None:
    """The retry ``key`` names when it is a retry of ``job_id``; None when the key is
    new; IdempotencyKeyReused when it names another job's retry."""
    found = await conn.fetchrow(RETRY_BY_KEY, key)
    if found is None:
        return None
    if found["retried_from_job_id"] != job_id:
        raise IdempotencyKeyReused("this idempotency key was used to retry another job")
    return job_from_row(found)


async def _refusal(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    job_id: str,
    error: asyncpg.UniqueViolationError | LiveRetryExists,
) -> Exception:
    """What a retry that lost a race answers: the live retry that won it, by name."""
    if isinstance(error, LiveRetryExists) or error.constraint_name != _ONE_LIVE_RETRY:
        return error
    root = await conn.fetchval(RERUN_ROOT, job_id)
    live = await conn.fetchrow(LINEAGE_RETRY, root, status_values(RERUNNABLE), None)
    return _live_retry(live["id"] if live else "made concurrently")


async def _rerun_retrying(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    job_id: str,
    spec: RetrySpec,
    reason: str,
    key: str | None,
    since: datetime | None,
    made: _Made,
) -> asyncpg.Record | None:
    """``_rerun`` in a transaction, again while a dependency it attaches is being ended
    (``units.attach_retrying``'s reason)."""
    return await attach_retrying_on(
        conn, lambda: _rerun(conn, job_id, spec, reason, key, since, made)
    )


async def _rerun(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    job_id: str,
    spec: RetrySpec,
    reason: str,
    key: str | None,
    since: datetime | None,
    made: _Made,
) -> asyncpg.Record | None:
    source = await conn.fetchrow(RERUN_SOURCE, job_id)
    if source is None:
        return None
    if source["parent_job_id"] is not None:
        await _require_no_live_sibling(conn, job_id, source)
    live = await conn.fetchrow(LINEAGE_RETRY, source["root"], status_values(RERUNNABLE), since)
    if live is not None:
        raise _live_retry(live["id"], made_since=JobStatus(live["status"]) in RERUNNABLE)
    await conn.execute(LOCK_RERUN_LINE, job_id)  # its place, as a create's
    row = await conn.fetchrow(
        RERUN_JOB,
        job_id,
        status_values(RERUNNABLE),
        spec.max_attempts,
        spec.timeout_ms,
        spec.definition_version,
        spec.snapshot_ttl_s,
        reason,
        key,
        UNTIL_DEPENDENCIES_END,
        made.id,
        made.snapshot,
        spec.deadline_s,
    )
    if row is None:
        return None
    if source["dependency_policy"] is not None:
        runs = sorted({r["id"] for r in await conn.fetch(LATEST_RUNS, job_id)})
        policy = DependencyPolicy(source["dependency_policy"])
        await attach(conn, row["id"], runs, policy, source["user_id"])
    # the jobs still waiting for the job wait for its re-run too
    await conn.execute(MOVE_WAITING, job_id, row["id"])
    return row


async def _require_no_live_sibling(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], job_id: str, source: asyncpg.Record
) -> None:
    parent_status = await conn.fetchval(LOCK_PARENT, source["parent_job_id"])
    if parent_status in CANCELLING:
        raise JobNotRetryable(f"the parent job is {parent_status}; its children stay cancelled")
    live = await conn.fetchval(
        LIVE_SIBLING,
        source["parent_job_id"],
        source["job_type"],
        job_id,
        status_values(RERUNNABLE),
    )
    if live is not None:
        raise LiveChildExists(
            f"the parent already has a {source['job_type']} child that is "
            f"unfinished or succeeded ({live}); retry that one when it fails"
        )


def _live_retry(retry_id: str, *, made_since: bool = False) -> LiveRetryExists:
    if made_since:
        return LiveRetryExists(
            f"this job's original was retried ({retry_id}) since this RetryJobs began"
        )
    return LiveRetryExists(
        f"this job's original already has a retry that is waiting, running or succeeded"
        f" ({retry_id}); retry that one when it fails"
    )
