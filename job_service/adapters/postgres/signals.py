"""Signals on PostgreSQL: SendSignal numbers a signal by bumping ``jobs.signal_seq`` (the
row lock orders concurrent sends, a finishing job and the per-job limit) and stores it in
the same statement; FetchSignals reads them for the holder of the job's lease."""

from __future__ import annotations

from typing import Any

import asyncpg

from job_service.adapters.postgres.vocabulary.line import retry_place
from job_service.adapters.postgres.vocabulary.outbox_rows import dispatch_key, dispatch_rows
from job_service.adapters.postgres.vocabulary.statuses import sql_status
from job_service.domain.lifecycle import LEASED, TERMINAL, JobStatus, status_values
from job_service.domain.signals import (
    FetchedSignals,
    JobSignal,
    ReceivedSignal,
    SentSignal,
    StoredSignal,
)
from shared.errors import ErrorCode, JobFinished, SignalLimitReached

JOB_OF_USER = "SELECT status, signal_seq FROM jobs WHERE id = $1 AND user_id = $2"

BY_KEY = """
SELECT s.seq, s.name, s.payload, s.sent_at, j.job_type
FROM job_signals s JOIN jobs j ON j.id = s.job_id AND j.user_id = $2
WHERE s.job_id = $1 AND s.idempotency_key = $3
"""

# One statement (one round trip, one commit). The row lock its UPDATE takes orders this
# send against other sends (seq in commit order, no gaps) and against the job's end: a
# signal is either stored while the job is unfinished, or refused. ``signal_seq`` counts
# the job's signals (gap-free, and they leave only with their job), so the limit ($7) is
# judged on the row as the lock holder left it (READ COMMITTED re-checks the WHERE on the
# newest version): concurrent sends never pass it, and a refused one writes nothing.
#
# A job waiting for a signal (ctx.wait_for_signal: retrying with SUSPENDED_SIGNAL until its
# timeout) is woken in the same statement: due now, with a work token for its queue. It
# runs again and looks at its signals; one not of the name it waits for suspends it again.
_SUSPENDED = (
    f"status = {sql_status(JobStatus.RETRYING)} AND error_code = '{ErrorCode.SUSPENDED_SIGNAL}'"
)
_WAITING = f"{_SUSPENDED} AND next_run_at > now()"
# ... and as the UPDATE leaves a job it woke (RETURNING sees the new row; no job waiting
# since before this transaction began is due at exactly its start)
_WOKEN = f"{_SUSPENDED} AND next_run_at = now()"
SEND = f"""
WITH numbered AS (
    UPDATE jobs SET signal_seq = signal_seq + 1,
        next_run_at = CASE WHEN {_WAITING} THEN now() ELSE next_run_at END,
        sched_key = CASE WHEN {_WAITING} THEN {retry_place("now()", "priority")}
                         ELSE sched_key END
    WHERE id = $1 AND user_id = $2 AND NOT (status = ANY($3::text[])) AND signal_seq < $7
    RETURNING id, signal_seq, status, job_type, queue, attempt_count,
              ({_WOKEN}) AS woken
), wake AS (
    {
    dispatch_rows(
        "(SELECT * FROM numbered WHERE woken)",
        dispatch_key("src.id", "wake", "src.signal_seq::text"),
        attempt="src.attempt_count + 1",
        trace="NULL::jsonb",
    )
}
)
INSERT INTO job_signals (job_id, seq, name, payload, idempotency_key)
SELECT id, signal_seq, $4, $5::jsonb, $6 FROM numbered
RETURNING seq, sent_at, (SELECT status FROM numbered), (SELECT job_type FROM numbered),
          (SELECT woken FROM numbered)
"""

FETCH = """
SELECT s.seq, s.name, s.payload, s.sent_at, j.user_id
FROM jobs j JOIN job_signals s ON s.job_id = j.id AND s.seq > $3
WHERE j.id = $1 AND j.lease_token = $2 AND j.status = ANY($4::text[])
ORDER BY s.seq LIMIT $5
"""

LEASE_HELD = """
SELECT user_id FROM jobs WHERE id = $1 AND lease_token = $2 AND status = ANY($3::text[])
"""

_LEASED, _TERMINAL = status_values(LEASED), status_values(TERMINAL)


class SignalRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def send(
        self,
        job_id: str,
        user_id: str,
        name: str,
        payload: Any,
        key: str | None,
        limit: int,
    ) -> SentSignal | StoredSignal | None:
        if key is not None and (stored := await self._by_key(job_id, user_id, key)):
            return stored
        try:
            row = await self._pool.fetchrow(
                SEND, job_id, user_id, _TERMINAL, name, payload, key, limit
            )
        except asyncpg.UniqueViolationError:
            # a concurrent send with the same key committed first: answer its signal
            assert key is not None
            return await self._by_key(job_id, user_id, key)
        if row is not None:
            signal = ReceivedSignal(row["seq"], name, row["sent_at"])
            status = JobStatus(row["status"])
            return SentSignal(signal, True, row["job_type"], status, woke=row["woken"])
        job = await self._pool.fetchrow(JOB_OF_USER, job_id, user_id)
        if job is None:
            return None
        status = job["status"]
        if status not in _TERMINAL:
            raise SignalLimitReached(
                f"the job holds {job['signal_seq']} signals, the most one job may hold: "
                "it takes no more",
                metadata={"job_id": job_id, "limit": str(limit)},
            )
        raise JobFinished(
            f"the job has finished ({status}): it takes no more signals",
            metadata={"job_id": job_id, "status": status},
        )

    async def _by_key(self, job_id: str, user_id: str, key: str) -> StoredSignal | None:
        stored = await self._pool.fetchrow(BY_KEY, job_id, user_id, key)
        if stored is None:
            return None
        signal = ReceivedSignal(stored["seq"], stored["name"], stored["sent_at"])
        sent = SentSignal(signal, False, stored["job_type"], None)
        return StoredSignal(sent, stored["name"], stored["payload"])

    async def fetch(
        self, job_id: str, lease_token: str, after_seq: int, limit: int
    ) -> FetchedSignals | None:
        rows = await self._pool.fetch(FETCH, job_id, lease_token, after_seq, _LEASED, limit + 1)
        if rows:
            user_id = rows[0]["user_id"]
        else:
            user_id = await self._pool.fetchval(LEASE_HELD, job_id, lease_token, _LEASED)
            if user_id is None:
                return None
        signals = [JobSignal(r["seq"], r["name"], r["payload"], r["sent_at"]) for r in rows]
        return FetchedSignals(user_id, signals[:limit], len(signals) > limit)
