"""Leases on PostgreSQL: extend a lease, end attempts as the leases use case decided (a
failed one, one whose lease ran out, a disconnected worker's), and store late usage
(claims.py grants the leases).

The lease token is the fence: every write after LockJobs names it, and a write whose token
is not the job's current one matches no row. Expiry is ``lock_until < now()`` on the
database clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import asyncpg

from job_service.adapters.postgres.vocabulary.deadlines import attempt_deadline, lease_until
from job_service.adapters.postgres.vocabulary.line import released_slot_tokens, retry_place
from job_service.adapters.postgres.vocabulary.outbox_rows import (
    CREATE_TRACE,
    dispatch_key,
    dispatch_rows,
    domain_event_rows,
)
from job_service.adapters.postgres.vocabulary.statuses import sql_status, timeline_event
from job_service.adapters.postgres.vocabulary.usage_rows import insert_usage, usage_row
from job_service.domain.attempts import (
    AttemptEnd,
    AttemptFacts,
    EndedAttempt,
    HeartbeatAck,
    LeaseState,
    LockedAttempt,
)
from job_service.domain.lifecycle import LEASED, TERMINAL, JobStatus, status_values
from shared.ai.provider import UsageRecord
from shared.errors import LeaseLost

# The lease renewed, never past the attempt's deadline; past it, no lease is held.
HEARTBEAT = f"""
UPDATE jobs SET lock_until = {lease_until("$3", "locked_at", "timeout_ms")},
    progress = CASE WHEN $4::float8 >= 0 THEN least($4::float8, 1) ELSE progress END
WHERE id = $1 AND lease_token = $2 AND status = ANY($5::text[])
  AND {attempt_deadline("locked_at", "timeout_ms")} > now()
RETURNING lock_until, status, signal_seq
"""

# Where a job stands for a worker's late or repeated report.
LEASE_STATE = """
SELECT status, lease_token::text AS lease_token, output_hash FROM jobs WHERE id = $1
"""

ATTEMPT_FOR_UPDATE = """
SELECT id::text AS id, job_type, status, attempt_count, max_attempts,
       lease_token::text AS lease_token, locked_by, user_id
FROM jobs WHERE id = $1 AND lease_token = $2 AND status = ANY($3::text[])
FOR UPDATE
"""

# Leases that lapsed; those whose attempt reached its deadline (where the lease stops
# however it is heartbeaten) ran too long.
EXPIRED_LEASES = f"""
SELECT id::text AS id, job_type, status, attempt_count, max_attempts,
       lease_token::text AS lease_token, locked_by, user_id,
       {attempt_deadline("locked_at", "timeout_ms")} <= now() AS past_deadline
FROM jobs WHERE status = ANY($1::text[]) AND lock_until < now()
ORDER BY lock_until LIMIT $2
FOR UPDATE SKIP LOCKED
"""

# A worker's leases, for ending them when it disconnected (usecases/sessions.py); the partial
# index of the reaper's scan keeps this to the leased jobs.
WORKER_LEASES = """
SELECT id::text AS id, job_type, status, attempt_count, max_attempts,
       lease_token::text AS lease_token, locked_by, user_id
FROM jobs WHERE status = ANY($1::text[]) AND locked_by = $2
ORDER BY lock_until LIMIT $3
FOR UPDATE SKIP LOCKED
"""

INSERT_USAGE = insert_usage("$1", "$2")
# The provider and model of a job's last provider call (seed 003 modelProvider, modelName).
SET_MODEL = "UPDATE jobs SET model_provider = $2, model_name = $3 WHERE id = $1"

_RETRYING, _CANCELLED = sql_status(JobStatus.RETRYING), sql_status(JobStatus.CANCELLED)

# A retry is due after its delay ($9 seconds); the end of a signal wait is due at once
# when the job holds a signal newer than the attempt saw ($12): the send committed while
# the attempt was ending, before the job waited, so it woke nothing (signals.py).
_RETRY_DUE = (
    "CASE WHEN jobs.signal_seq > $12::bigint THEN now() ELSE now() + $9 * interval '1 second' END"
)
# Ends an attempt that did not succeed; $4 is the new status. Retries get a new dispatch
# row available at next_run_at; terminal statuses get their domain event.
END_ATTEMPT = f"""
WITH ended AS (
    UPDATE jobs SET status = $4::text, error_code = $5, public_error_message = $6,
        internal_error_message = $7, lock_until = NULL, updated_at = now(),
        attempt_count = attempt_count - $8,
        next_run_at = CASE WHEN $4::text = {_RETRYING} THEN {_RETRY_DUE} END,
        sched_key = CASE WHEN $4::text = {_RETRYING}
                         THEN {retry_place(_RETRY_DUE, "priority")}
                         END,
        finished_at = CASE WHEN $4::text = ANY($10::text[]) THEN now() END,
        cancel_requested_at = CASE WHEN $4::text = {_CANCELLED}
                                   THEN coalesce(cancel_requested_at, now())
                                   ELSE cancel_requested_at END
    WHERE id = $1 AND lease_token = $2 AND status = $3
    RETURNING id, job_type, queue, status, attempt_count, next_run_at, locked_by,
              concurrency_key, lease_token, model_tier
), unknown AS (
    -- a reaped attempt of an AI job whose worker reported no usage (ReportUsage may have
    -- come first: a worker that lost its lease and said so before the reaper came by)
    SELECT $11::bool AND e.model_tier IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM usage_logs u WHERE u.job_id = e.id AND u.attempt = e.attempt_count + $8
    ) AS usage_unknown
    FROM ended e
), release AS (
    {released_slot_tokens("ended")}
), event AS (
    {
    timeline_event(
        "ended, unknown",
        "$3",
        "status",
        attempt="attempt_count + $8",
        reason="$5",
        worker_id="locked_by",
        lease_token="$2",
        usage_unknown="unknown.usage_unknown",
    )
}
), dispatch AS (
    {
    dispatch_rows(
        f"(SELECT * FROM ended WHERE status = {_RETRYING})",
        dispatch_key("src.id", "retry", "$2"),
        attempt="src.attempt_count + 1",
        available_at="src.next_run_at",
        trace=CREATE_TRACE,
    )
}
), domain_event AS (
    {domain_event_rows(f"(SELECT * FROM ended WHERE status <> {_RETRYING})")}
)
SELECT status, next_run_at, unknown.usage_unknown FROM ended, unknown
"""

# The attempt lease token $2 names on job $1: an ended attempt's (its event keeps the
# token), else the current one's; NULL when the token names no attempt of the job.
USAGE_ATTEMPT = """
SELECT coalesce(
    (SELECT e.attempt FROM job_events e
     WHERE e.job_id = j.id AND e.lease_token = $2 ORDER BY e.id LIMIT 1),
    CASE WHEN j.lease_token = $2 THEN j.attempt_count END) AS attempt
FROM jobs j WHERE j.id = $1
"""

REPORT_USAGE = f"""
WITH stored AS (
    {insert_usage("$1", "$2::int")}
    RETURNING 1
), known AS (
    UPDATE job_events SET usage_unknown = false
    WHERE job_id = $3 AND lease_token = $4 AND usage_unknown
)
SELECT count(*) FROM stored
"""

# The status sets as bind parameters, computed once (every lock and heartbeat binds one).
_LEASED, _TERMINAL = (status_values(s) for s in (LEASED, TERMINAL))


class LeaseRepository:
    """Leases on the jobs table, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool, *, lease_ttl_s: float) -> None:
        self._pool = pool
        self._lease_ttl_ms = lease_ttl_s * 1000

    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck:
        row = await self._pool.fetchrow(
            HEARTBEAT, job_id, lease_token, self._lease_ttl_ms, progress, _LEASED
        )
        if row is None:
            raise LeaseLost("the lease on this job is no longer held")
        return HeartbeatAck(
            lease_expires_at=row["lock_until"],
            cancel_requested=row["status"] == JobStatus.CANCEL_REQUESTED,
            latest_signal_seq=row["signal_seq"],
        )

    @asynccontextmanager
    async def ending(self) -> AsyncIterator[AttemptTransaction]:
        """A transaction that ends attempts; committed when the block ends without an
        error."""
        async with self._pool.acquire() as conn, conn.transaction():
            yield AttemptTransaction(conn)

    async def lease_state(self, job_id: str) -> LeaseState | None:
        """The job's status, current lease token and output hash."""
        return _lease_state(await self._pool.fetchrow(LEASE_STATE, job_id))

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord]
    ) -> tuple[int, int]:
        """Stores an attempt's usage whether or not its lease is still held (the attempt
        is named by its lease token: the current one or an ended attempt's), skipping
        calls stored already, and clears the attempt's unknown-usage mark; returns (the
        attempt number, rows stored). LeaseLost when the token names no attempt of the
        job."""
        async with self._pool.acquire() as conn, conn.transaction():
            attempt = await conn.fetchval(USAGE_ATTEMPT, job_id, lease_token)
            if attempt is None:
                raise LeaseLost("no attempt of this job holds this lease token")
            stored = await conn.fetchval(
                REPORT_USAGE, [usage_row(job_id, u) for u in usage], attempt, job_id, lease_token
            )
        return attempt, int(stored)


class AttemptTransaction:
    """The statements that end attempts, on one connection inside its transaction (the
    lease repository's own, or a worker session's: usecases/sessions.py)."""

    def __init__(self, conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record]) -> None:
        self._conn = conn

    async def attempt(self, job_id: str, lease_token: str) -> LockedAttempt | None:
        row = await self._conn.fetchrow(ATTEMPT_FOR_UPDATE, job_id, lease_token, _LEASED)
        return None if row is None else _locked(row)

    async def expired(self, limit: int) -> list[LockedAttempt]:
        return [_locked(row) for row in await self._conn.fetch(EXPIRED_LEASES, _LEASED, limit)]

    async def of_worker(self, worker_id: str, limit: int) -> list[LockedAttempt]:
        rows = await self._conn.fetch(WORKER_LEASES, _LEASED, worker_id, limit)
        return [_locked(row) for row in rows]

    async def lease_state(self, job_id: str) -> LeaseState | None:
        return _lease_state(await self._conn.fetchrow(LEASE_STATE, job_id))

    async def store_usage(self, attempt: LockedAttempt, usage: Sequence[UsageRecord]) -> None:
        job_id = attempt.facts.job_id
        await self._conn.execute(
            INSERT_USAGE, [usage_row(job_id, u) for u in usage], attempt.facts.attempt
        )
        await self._conn.execute(SET_MODEL, job_id, usage[-1].provider, usage[-1].model)

    async def end(
        self, attempt: LockedAttempt, end: AttemptEnd, message: str, *, reaped: bool = False
    ) -> EndedAttempt:
        row = await self._conn.fetchrow(
            END_ATTEMPT,
            attempt.facts.job_id,
            attempt.lease_token,
            attempt.facts.status.value,
            end.status.value,
            end.code,
            end.public_message,
            message,
            1 if end.refund_attempt else 0,
            end.delay_s,
            _TERMINAL,
            reaped,
            end.wake_after_signal,
        )
        assert row is not None, "attempt changed although its row was locked"
        return EndedAttempt(JobStatus(row["status"]), row["next_run_at"], row["usage_unknown"])


def _locked(row: asyncpg.Record) -> LockedAttempt:
    facts = AttemptFacts(
        row["id"],
        row["job_type"],
        JobStatus(row["status"]),
        row["attempt_count"],
        row["max_attempts"],
    )
    past_deadline = row.get("past_deadline", False)
    return LockedAttempt(facts, row["lease_token"], past_deadline, row["user_id"])


def _lease_state(row: asyncpg.Record | None) -> LeaseState | None:
    if row is None:
        return None
    return LeaseState(JobStatus(row["status"]), row["lease_token"], row["output_hash"])
