"""Job deadlines on PostgreSQL: the deadline keeper's round, which ends the unfinished jobs
whose deadline has passed (by the database clock) FAILED with DEADLINE_EXCEEDED — a waiting
job at once, a running one with its lease revoked (the worker's later writes match no row,
as after an expired lease; the use case tells it to stop)."""

from __future__ import annotations

import asyncpg

from job_service.adapters.postgres.vocabulary.line import released_slot_tokens
from job_service.adapters.postgres.vocabulary.outbox_rows import domain_event_rows
from job_service.adapters.postgres.vocabulary.statuses import sql_status, timeline_event
from job_service.domain.lifecycle import JobStatus, Step, sources, statuses_sql, transition
from shared.errors import ErrorCode, public_message

_ENDABLE = statuses_sql(sources(Step.DEADLINE))
_FAILED = sql_status(transition(JobStatus.RUNNING, Step.DEADLINE))
_RUNNING = sql_status(JobStatus.RUNNING)
# the worker whose attempt the deadline stopped, on the timeline event
_HOLDER = f"CASE WHEN from_status = {_RUNNING} THEN locked_by END"

# Up to $1 jobs past their deadline, soonest first, taken SKIP LOCKED (replicas share the
# work; a job another transaction holds — its worker submitting — is ended next round if
# still unfinished). Each gets its timeline event and domain event; a running one frees
# its limited slot as an ended attempt does. $2, $3: the error code and public message.
END_PASSED = f"""
WITH due AS (
    SELECT j.id, j.status FROM jobs j
    WHERE j.deadline_at IS NOT NULL AND j.deadline_at <= now() AND j.status IN {_ENDABLE}
    ORDER BY j.deadline_at LIMIT $1
    FOR UPDATE OF j SKIP LOCKED
), ended AS (
    UPDATE jobs j SET status = {_FAILED}, error_code = $2, public_error_message = $3,
        internal_error_message = NULL, lock_until = NULL, next_run_at = NULL,
        finished_at = now(), updated_at = now()
    FROM due d WHERE j.id = d.id
    RETURNING j.id, j.job_type, j.queue, j.status, j.attempt_count, j.concurrency_key,
              j.lease_token, j.locked_by, d.status AS from_status
), stopped AS (
    SELECT * FROM ended WHERE from_status = {_RUNNING}
), release AS (
    {released_slot_tokens("stopped")}
), event AS (
    {timeline_event("ended", "from_status", "status", reason="$2", worker_id=_HOLDER)}
), domain_event AS (
    {domain_event_rows("ended")}
)
SELECT id::text AS id, job_type, from_status FROM ended
"""


class DeadlineRepository:
    """The deadline keeper's statement, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def end_passed(self, limit: int) -> list[tuple[str, str, JobStatus]]:
        """Ends up to ``limit`` jobs past their deadline: each one's id, job type and the
        status it was in."""
        code = ErrorCode.DEADLINE_EXCEEDED
        rows = await self._pool.fetch(END_PASSED, limit, code.value, public_message(code))
        return [(r["id"], r["job_type"], JobStatus(r["from_status"])) for r in rows]
