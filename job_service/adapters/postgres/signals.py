"""Signals on PostgreSQL: SendSignal numbers a signal by bumping ``jobs.signal_seq`` (the
row lock orders concurrent sends and a finishing job) and stores it in the same
transaction; FetchSignals reads them for the holder of the job's lease."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from job_service.domain.lifecycle import LEASED, TERMINAL, JobStatus, status_values
from job_service.domain.models import JobSignal, ReceivedSignal, SentSignal
from shared.errors import IdempotencyKeyReused, JobFinished

JOB_OF_USER = "SELECT job_type, status FROM jobs WHERE id = $1 AND user_id = $2"

BY_KEY = """
SELECT seq, name, sent_at, (name = $3 AND payload = $4::jsonb) AS same
FROM job_signals WHERE job_id = $1 AND idempotency_key = $2
"""

# The row lock it takes orders this send against other sends and against the job's end:
# a signal is either stored before the job finishes, or refused.
NEXT_SEQ = """
UPDATE jobs SET signal_seq = signal_seq + 1
WHERE id = $1 AND NOT (status = ANY($2::text[]))
RETURNING signal_seq, status
"""

INSERT_SIGNAL = """
INSERT INTO job_signals (job_id, seq, name, payload, idempotency_key)
VALUES ($1, $2, $3, $4::jsonb, $5)
RETURNING sent_at
"""

FETCH = """
SELECT s.seq, s.name, s.payload, s.sent_at
FROM jobs j JOIN job_signals s ON s.job_id = j.id AND s.seq > $3
WHERE j.id = $1 AND j.lease_token = $2 AND j.status = ANY($4::text[])
ORDER BY s.seq LIMIT $5
"""

LEASE_HELD = """
SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2 AND status = ANY($3::text[])
"""

_LEASED, _TERMINAL = status_values(LEASED), status_values(TERMINAL)


class SignalRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def send(
        self, job_id: str, user_id: str, name: str, payload: dict[str, Any], key: str | None
    ) -> SentSignal | None:
        try:
            return await self._send(job_id, user_id, name, payload, key)
        except asyncpg.UniqueViolationError:
            # a concurrent send with the same key committed first: answer its signal
            return await self._send(job_id, user_id, name, payload, key)

    async def _send(
        self, job_id: str, user_id: str, name: str, payload: dict[str, Any], key: str | None
    ) -> SentSignal | None:
        async with self._pool.acquire() as conn, conn.transaction():
            job = await conn.fetchrow(JOB_OF_USER, job_id, user_id)
            if job is None:
                return None
            if key is not None:
                stored = await conn.fetchrow(BY_KEY, job_id, key, name, payload)
                if stored is not None:
                    if not stored["same"]:
                        raise IdempotencyKeyReused(
                            "this idempotency key was used for another signal to this job"
                        )
                    signal = ReceivedSignal(stored["seq"], stored["name"], stored["sent_at"])
                    return SentSignal(signal, False, job["job_type"], None)
            numbered = await conn.fetchrow(NEXT_SEQ, job_id, _TERMINAL)
            if numbered is None:
                raise JobFinished(
                    f"the job has finished ({job['status']}): it takes no more signals",
                    metadata={"job_id": job_id, "status": job["status"]},
                )
            seq = numbered["signal_seq"]
            sent_at = await conn.fetchval(INSERT_SIGNAL, job_id, seq, name, payload, key)
        return SentSignal(
            ReceivedSignal(seq, name, sent_at),
            True,
            job["job_type"],
            JobStatus(numbered["status"]),
        )

    async def fetch(
        self, job_id: str, lease_token: str, after_seq: int, limit: int
    ) -> tuple[Sequence[JobSignal], bool] | None:
        rows = await self._pool.fetch(FETCH, job_id, lease_token, after_seq, _LEASED, limit + 1)
        if not rows and await self._pool.fetchval(LEASE_HELD, job_id, lease_token, _LEASED) is None:
            return None
        signals = [JobSignal(r["seq"], r["name"], r["payload"], r["sent_at"]) for r in rows]
        return signals[:limit], len(signals) > limit


def signal_from_json(raw: dict[str, Any]) -> ReceivedSignal:
    """A received signal as GET_JOB aggregates it into jsonb."""
    return ReceivedSignal(raw["seq"], raw["name"], datetime.fromisoformat(raw["sent_at"]))
