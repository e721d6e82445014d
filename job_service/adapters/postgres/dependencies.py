"""Dependencies on PostgreSQL: the resolver's round over the edges the trigger marked
ended (migration 0021), the results a leased dependent reads, and the jobs a failed
dependency ended. Attaching a new job's edges is the vocabulary's
(``vocabulary/dependencies.py``), as every statement creating jobs does it; GetJob's read
of the edges is ``jobs.py``'s. How an ended dependency is counted exactly once: ADR 0008.
"""

from __future__ import annotations

import asyncpg

from job_service.adapters.postgres.vocabulary.dependencies import outcome, outcome_writes
from job_service.adapters.postgres.vocabulary.line import place_in_line
from job_service.adapters.postgres.vocabulary.outbox_rows import dispatch_key, domain_event_rows
from job_service.adapters.postgres.vocabulary.statuses import (
    sql_status,
    statuses_sql,
    timeline_event,
)
from job_service.domain.dependencies import Outcome
from job_service.domain.lifecycle import (
    LEASED,
    TERMINAL,
    JobStatus,
    status_values,
)
from shared.dependencies import DependencyOutput
from shared.errors import ErrorCode

_TERMINAL = statuses_sql(TERMINAL)
_BROKEN = statuses_sql(TERMINAL - {JobStatus.SUCCEEDED})
_CREATED = sql_status(JobStatus.CREATED)
_RUN, _FAIL, _CANCEL = (f"'{o.value}'" for o in (Outcome.RUN, Outcome.FAIL, Outcome.CANCEL))
# the outcome's inputs: the edges a job has left to count after this round's, and whether
# it still waits (``domain.dependencies.outcome``)
_LEFT, _WAITING = "j.dependencies_uncounted - p.n", f"j.status = {_CREATED}"

# The resolver's round: up to $1 ended edges not yet counted, taken (SKIP LOCKED: replicas
# share the work) and marked counted; their jobs locked in id order (two rounds never
# deadlock) and counted down by them. A job still waiting that a failed or cancelled
# dependency breaks (its policy not "run") ends without running — its policy's status,
# timeline event and domain event; its dispatch row deleted — which the trigger marks in
# turn on the jobs waiting for it. One with nothing left to count becomes due now, in its
# line, its dispatch row with it. Either happens once: the count reaches 0 once, and an
# ended job waits no more.
COUNT = f"""
WITH taken AS (
    SELECT e.job_id, e.depends_on_id, e.ended_status FROM job_dependencies e
    WHERE e.ended_status IS NOT NULL AND NOT e.counted
    ORDER BY e.job_id LIMIT $1
    FOR UPDATE SKIP LOCKED
), marked AS (
    UPDATE job_dependencies e SET counted = true FROM taken t
    WHERE e.job_id = t.job_id AND e.depends_on_id = t.depends_on_id
), per_job AS (
    SELECT job_id, count(*) AS n, bool_or(ended_status IN {_BROKEN}) AS failed
    FROM taken GROUP BY job_id
), locked AS (
    SELECT j.id, j.queue, j.priority, j.fairness_key, NULL::timestamptz AS next_run_at, p.n,
           {outcome("j.dependency_policy", "p.failed", _LEFT, _WAITING)} AS outcome
    FROM jobs j JOIN per_job p ON p.job_id = j.id
    ORDER BY j.id FOR UPDATE OF j
), decided AS (
    SELECT src.*, coalesce(src.outcome IN ({_FAIL}, {_CANCEL}), false) AS broken,
           coalesce(src.outcome = {_RUN}, false) AS ready,
           CASE WHEN src.outcome = {_RUN} THEN {place_in_line("src")} END AS place
    FROM locked src
), counted AS (
    UPDATE jobs j SET
        dependencies_uncounted = j.dependencies_uncounted - d.n,
        {outcome_writes("d.outcome")},
        next_run_at = CASE WHEN d.broken THEN NULL WHEN d.ready THEN now()
                           ELSE j.next_run_at END,
        sched_key = CASE WHEN d.ready THEN d.place ELSE j.sched_key END,
        finished_at = CASE WHEN d.broken THEN now() ELSE j.finished_at END,
        updated_at = CASE WHEN d.broken OR d.ready THEN now() ELSE j.updated_at END
    FROM decided d WHERE j.id = d.id
    RETURNING j.id, j.job_type, j.status, j.attempt_count, j.error_code, d.broken, d.ready
), ended AS (
    SELECT * FROM counted WHERE broken
), dispatch AS (
    UPDATE outbox_events o SET available_at = now()
    FROM counted c
    WHERE c.ready AND o.dedupe_key = {dispatch_key("c.id::text", "create")}
      AND o.status = 'pending'
    RETURNING o.id
), undispatched AS (
    DELETE FROM outbox_events o USING ended
    WHERE o.dedupe_key = {dispatch_key("ended.id::text", "create")} AND o.status = 'pending'
), event AS (
    {timeline_event("ended", JobStatus.CREATED, "ended.status", reason="lower(ended.error_code)")}
), domain_event AS (
    {domain_event_rows("ended")}
)
SELECT (SELECT count(*) FROM taken) AS counted,
       (SELECT count(*) FROM counted WHERE ready) AS due,
       (SELECT count(*) FROM dispatch) AS dispatched, (SELECT count(*) FROM ended) AS ended
"""

# The results of leased job $1's (lease token $2) dependencies after id $3, $4 + 1 of
# them, in id order (a dependency retention deleted is left out).
RESULTS = """
SELECT d.id::text AS id, d.job_type, d.status, d.validated_output, d.error_code,
       d.target_type, d.target_id
FROM jobs j
JOIN job_dependencies e ON e.job_id = j.id
JOIN jobs d ON d.id = e.depends_on_id
WHERE j.id = $1::uuid AND j.lease_token = $2::uuid AND j.status = ANY($5::text[])
  AND e.depends_on_id > $3::uuid
ORDER BY e.depends_on_id
LIMIT $4 + 1
"""
LEASE_HELD = (
    "SELECT 1 FROM jobs WHERE id = $1::uuid AND lease_token = $2::uuid AND status = ANY($3::text[])"
)
_LEASED = status_values(LEASED)
_NIL = "00000000-0000-0000-0000-000000000000"

# The jobs ended because job $1 failed or was cancelled (their policy's error, never run).
ENDED_BY = f"""
SELECT j.id::text AS id
FROM job_dependencies e JOIN jobs j ON j.id = e.job_id
WHERE e.depends_on_id = $1::uuid AND j.attempt_count = 0
  AND j.error_code IN ('{ErrorCode.DEPENDENCY_FAILED.value}',
                       '{ErrorCode.DEPENDENCY_CANCELLED.value}')
ORDER BY j.id
"""

JOB_OWNER = "SELECT user_id FROM jobs WHERE id = $1::uuid"

# What the results of one answer may hold in all (output JSON as stored): about 1 MiB.
MAX_RESULT_BYTES = 1024 * 1024


def _output(row: asyncpg.Record) -> DependencyOutput:
    return DependencyOutput(
        job_id=row["id"],
        job_type=row["job_type"],
        status=row["status"],
        output=row["validated_output"],
        error_code=row["error_code"],
        target_type=row["target_type"],
        target_id=row["target_id"],
    )


class DependencyRepository:
    """Dependencies between jobs, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def count(self, limit: int) -> dict[str, int]:
        """One round of the resolver: how many ended edges it counted, jobs it made due,
        dispatch rows it made due, jobs it ended by their policy."""
        row = await self._pool.fetchrow(COUNT, limit)
        assert row is not None
        return dict(row)

    async def results(
        self, job_id: str, lease_token: str, after_job_id: str, limit: int
    ) -> tuple[list[DependencyOutput], bool] | None:
        """Up to ``limit`` dependency results after ``after_job_id`` (and within
        MAX_RESULT_BYTES), and whether there are more; None when the lease is not held."""
        after = after_job_id or _NIL
        rows = await self._pool.fetch(RESULTS, job_id, lease_token, after, limit, _LEASED)
        if not rows:
            held = await self._pool.fetchval(LEASE_HELD, job_id, lease_token, _LEASED)
            return None if held is None else ([], False)
        results: list[DependencyOutput] = []
        size = 0
        for row in rows[:limit]:
            size += len(str(row["validated_output"] or ""))
            if results and size > MAX_RESULT_BYTES:
                return results, True
            results.append(_output(row))
        return results, len(rows) > limit

    async def owner(self, job_id: str) -> str | None:
        user_id: str | None = await self._pool.fetchval(JOB_OWNER, job_id)
        return user_id

    async def ended_by(self, job_id: str) -> list[str]:
        """The jobs that ``job_id``'s end ended by their policy (never run)."""
        return [r["id"] for r in await self._pool.fetch(ENDED_BY, job_id)]
