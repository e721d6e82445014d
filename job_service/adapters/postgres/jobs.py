"""Jobs on PostgreSQL: read one, cancel it with the cascade to its unfinished descendants
(a unit of work, ``units.cancel_descendants_of``, as a bulk cancel's page cascades too),
and expire snapshots. New jobs are ``new_jobs.py``'s."""

from __future__ import annotations

from dataclasses import replace

import asyncpg

from job_service.adapters.postgres.rows import (
    ERROR_ATTEMPT,
    JOB_COLUMNS,
    event_from_json,
    job_from_row,
    signal_from_json,
    step_from_json,
)
from job_service.adapters.postgres.units import cancel_descendants_of
from job_service.adapters.postgres.vocabulary.job_lists import durable_steps
from job_service.adapters.postgres.vocabulary.statuses import (
    cancelled_events,
    sql_status,
    timeline_event,
)
from job_service.domain.dependencies import SHOWN_EDGES, UNTIL_DEPENDENCIES_END, waiting_hold
from job_service.domain.holds import Hold
from job_service.domain.jobs import SHOWN, Artifact, InputState, Job
from job_service.domain.lifecycle import (
    TERMINAL,
    JobStatus,
    Step,
    sources,
    status_values,
    transition,
)
from shared.errors import ErrorCode, public_message

# One job with the newest/first few of each of its lists ($3..$7, $9: how many, ``SHOWN``)
# and each list's full length; signals are counted by ``signal_seq`` (gap-free, and they
# leave only with their job), the others by their indexes (job_id / parent_job_id). Its
# input is its snapshot when that is at most $8 bytes of JSON; its retries are found by
# their lineage (jobs_retry_lineage).
GET_JOB = f"""
SELECT {JOB_COLUMNS},
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'artifact_type', a.artifact_type, 'artifact_id', a.artifact_id,
                'ordinal', a.ordinal, 'payload', a.payload) ORDER BY a.ordinal, a.id), '[]')
     FROM (SELECT * FROM (
               SELECT *, sum(octet_length(payload::text)) OVER (ORDER BY ordinal, id) AS upto
               FROM job_artifacts WHERE job_id = j.id ORDER BY ordinal, id LIMIT $3) w
           WHERE upto <= $7) a) AS artifacts,
    (SELECT count(*) FROM job_artifacts a WHERE a.job_id = j.id)::int AS artifacts_total,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'from', e.from_status, 'to', e.to_status, 'attempt', e.attempt,
                'reason', e.reason, 'at', e.created_at, 'worker', e.worker_id)
                ORDER BY e.id), '[]')
     FROM (SELECT * FROM job_events WHERE job_id = j.id ORDER BY id DESC LIMIT $4) e)
        AS events,
    (SELECT count(*) FROM job_events e WHERE e.job_id = j.id)::int AS events_total,
    (SELECT coalesce(array_agg(c.id::text ORDER BY c.created_at, c.id), '{{}}')
     FROM (SELECT id, created_at FROM jobs WHERE parent_job_id = j.id
           ORDER BY created_at, id LIMIT $5) c) AS child_job_ids,
    (SELECT count(*) FROM jobs c WHERE c.parent_job_id = j.id)::int AS child_jobs_total,
    (SELECT count(*) FROM job_events e WHERE e.job_id = j.id AND e.usage_unknown)::int
        AS usage_unknown_attempts,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'seq', s.seq, 'name', s.name, 'sent_at', s.sent_at) ORDER BY s.seq), '[]')
     FROM (SELECT seq, name, sent_at FROM job_signals WHERE job_id = j.id
           ORDER BY seq DESC LIMIT $6) s) AS signals,
    j.signal_seq AS signals_total,
    {durable_steps("j.id", "$10")},
    ARRAY(SELECT d.depends_on_id::text FROM job_dependencies d WHERE d.job_id = j.id
          ORDER BY d.depends_on_id LIMIT {SHOWN_EDGES}) AS depends_on,
    (SELECT count(*) FROM job_dependencies d WHERE d.job_id = j.id)::int AS dependencies_total,
    ARRAY(SELECT d.job_id::text FROM job_dependencies d WHERE d.depends_on_id = j.id
          ORDER BY d.job_id LIMIT {SHOWN_EDGES}) AS dependent_job_ids,
    (SELECT count(*) FROM job_dependencies d WHERE d.depends_on_id = j.id)::int
        AS dependents_total,
    (SELECT count(*) FROM job_dependencies d WHERE d.job_id = j.id AND d.ended_status IS NULL)
        ::int AS dependencies_pending,
    j.dependency_policy,
    CASE WHEN snapshot.bytes <= $8 THEN snapshot.payload END AS input,
    snapshot.bytes AS input_bytes,
    ARRAY(SELECT r.id::text FROM jobs r
          WHERE r.retry_root_id = coalesce(j.retry_root_id, j.id) AND r.retried_from_job_id = j.id
          ORDER BY r.created_at, r.id LIMIT $9) AS retried_as_job_ids,
    {ERROR_ATTEMPT},
    usage.*
FROM jobs j
LEFT JOIN LATERAL (
    SELECT s.payload, octet_length(s.payload::text) AS bytes
    FROM job_snapshots s WHERE s.job_id = j.id
) snapshot ON true
CROSS JOIN LATERAL (
    SELECT coalesce(sum(u.input_tokens), 0)::bigint AS total_input_tokens,
           coalesce(sum(u.output_tokens), 0)::bigint AS total_output_tokens,
           coalesce(sum(u.cost_usd), 0) AS total_cost_usd
    FROM usage_logs u WHERE u.job_id = j.id
) usage
WHERE j.id = $1 AND ($2::text IS NULL OR j.user_id = $2)
"""

CANCEL_STATE = """
SELECT status, lease_token::text AS lease_token, attempt_count FROM jobs
WHERE id = $1 AND user_id = $2 FOR UPDATE
"""

_CANCELLED = sql_status(JobStatus.CANCELLED)

# queued/retrying -> cancelled at once, or running -> cancel_requested.
CANCEL = f"""
WITH changed AS (
    UPDATE jobs SET status = $3::text, cancel_requested_at = now(), updated_at = now(),
        finished_at = CASE WHEN $3::text = {_CANCELLED} THEN now() END,
        next_run_at = NULL,
        error_code = CASE WHEN $3::text = {_CANCELLED} THEN $4 END,
        public_error_message = CASE WHEN $3::text = {_CANCELLED} THEN $5 END
    WHERE id = $1 AND status = $2
    RETURNING id, job_type, status, attempt_count
), event AS (
    {timeline_event("changed", "$2", "status", reason="'cancel'")}
), domain_event AS (
    {cancelled_events("changed")}
)
SELECT status FROM changed
"""

# Removes expired snapshots of finished jobs (an unfinished job still needs its input).
DELETE_EXPIRED_SNAPSHOTS = """
DELETE FROM job_snapshots WHERE job_id IN (
    SELECT s.job_id FROM job_snapshots s JOIN jobs j ON j.id = s.job_id
    WHERE s.expires_at < now() AND j.status = ANY($1::text[])
    ORDER BY s.expires_at LIMIT $2
    FOR UPDATE OF s SKIP LOCKED
)
"""


class JobRepository:
    """Jobs with their snapshots, timeline and outbox rows, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def get(self, job_id: str, user_id: str | None) -> Job | None:
        """The job with (the first or newest ``SHOWN`` of) its artifacts, timeline, children
        and signals; ``user_id`` None reads any user's job."""
        row = await self._pool.fetchrow(
            GET_JOB,
            job_id,
            user_id,
            SHOWN.artifacts,
            SHOWN.events,
            SHOWN.child_jobs,
            SHOWN.signals,
            SHOWN.artifact_bytes,
            SHOWN.input_bytes,
            SHOWN.retries,
            SHOWN.steps,
        )
        if row is None:
            return None
        return replace(
            job_from_row(
                row,
                artifacts=[Artifact(**a) for a in row["artifacts"]],
                events=[event_from_json(e) for e in row["events"]],
            ),
            child_job_ids=list(row["child_job_ids"]),
            total_input_tokens=row["total_input_tokens"],
            total_output_tokens=row["total_output_tokens"],
            total_cost_usd=row["total_cost_usd"],
            usage_unknown_attempts=row["usage_unknown_attempts"],
            signals=[signal_from_json(s) for s in row["signals"]],
            steps=[step_from_json(s) for s in row["steps"]],
            steps_total=row["steps_total"],
            artifacts_total=row["artifacts_total"],
            events_total=row["events_total"],
            child_jobs_total=row["child_jobs_total"],
            signals_total=row["signals_total"],
            depends_on=list(row["depends_on"]),
            dependencies_total=row["dependencies_total"],
            dependencies_pending=row["dependencies_pending"],
            dependency_policy=row["dependency_policy"],
            dependent_job_ids=list(row["dependent_job_ids"]),
            dependents_total=row["dependents_total"],
            hold=_dependency_hold(row),
            input=row["input"],
            input_state=_input_state(row),
            input_bytes=row["input_bytes"] or 0,
            retried_as_job_ids=list(row["retried_as_job_ids"]),
        )

    async def cancel(
        self, job_id: str, user_id: str
    ) -> tuple[JobStatus, JobStatus, list[str]] | None:
        """Applies CancelJob to the job and, in the same transaction, its unfinished
        descendants; returns (status before, status after, descendants now
        CANCEL_REQUESTED), or None when the user has no such job. The caller judges
        statuses that cannot be cancelled (the descendants are then left alone)."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(CANCEL_STATE, job_id, user_id)
            if row is None:
                return None
            before = JobStatus(row["status"])
            if before not in sources(Step.CANCEL):
                return before, before, []
            after = transition(before, Step.CANCEL)
            changed = await conn.fetchval(
                CANCEL,
                job_id,
                before.value,
                after.value,
                ErrorCode.CANCELLED.value,
                public_message(ErrorCode.CANCELLED),
            )
            assert changed == after.value, "cancel raced although the row was locked"
            descendants = await cancel_descendants_of(conn, [job_id])
            requested = [j for j, status in descendants if status is JobStatus.CANCEL_REQUESTED]
            return before, after, requested

    async def cancel_descendants(self, job_id: str, user_id: str) -> list[tuple[str, JobStatus]]:
        """Cancels the unfinished descendants of a (finished) job of the user; returns each
        one changed with its new status."""
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchrow(CANCEL_STATE, job_id, user_id) is None:
                return []
            return await cancel_descendants_of(conn, [job_id])

    async def delete_expired_snapshots(self, limit: int) -> int:
        """Removes up to ``limit`` expired snapshots of finished jobs; returns how many."""
        done = await self._pool.execute(DELETE_EXPIRED_SNAPSHOTS, status_values(TERMINAL), limit)
        return int(done.split()[-1])


def _input_state(row: asyncpg.Record) -> InputState:
    if row["input_bytes"] is None:
        return InputState.REMOVED
    return InputState.SHOWN if row["input"] is not None else InputState.TOO_LARGE


def _dependency_hold(row: asyncpg.Record) -> Hold | None:
    """What a job waiting for its dependencies waits for; None for any other job. One whose
    last dependency ended still waits until the resolver counted it (its due time is
    UNTIL_DEPENDENCIES_END: no time to wait for, not NOT_DUE)."""
    waiting = row["dependencies_pending"] or row["next_run_at"] == UNTIL_DEPENDENCIES_END
    if row["status"] != JobStatus.CREATED.value or not waiting:
        return None
    return waiting_hold(row["dependencies_pending"], row["dependencies_total"])
