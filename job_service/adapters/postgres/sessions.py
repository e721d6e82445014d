"""Worker sessions on PostgreSQL: open, close, and, after a disconnect's grace, end the
worker's leases unless it opened a session since (anywhere).

Every step on one worker's sessions runs under a transaction-scoped advisory lock on that
worker, so that "did it come back?" and "end its leases" cannot interleave with a new
session's registration: either the new session is committed first (nothing ends) or the
leases end first (the worker, alive after all, is fenced with LEASE_LOST).
"""

from __future__ import annotations

import asyncpg

from job_service.adapters.postgres.leases import end_worker_leases
from job_service.domain.models import FailureOutcome
from job_service.ports.leases import Decide

# One lock per worker id; the prefix keeps it apart from the claim's concurrency-key locks.
LOCK_WORKER = "SELECT pg_advisory_xact_lock(hashtextextended('worker-session:' || $1, 0))"

# A new session replaces the worker's open ones (rows a crashed replica left open).
SUPERSEDE = """
UPDATE worker_sessions SET closed_at = now() WHERE worker_id = $1 AND closed_at IS NULL
"""

OPEN = """
INSERT INTO worker_sessions (worker_id, instance_id) VALUES ($1, $2) RETURNING id
"""

# Closed sessions are kept this long for diagnosis; pruned a few at a time by each open.
PRUNE = """
DELETE FROM worker_sessions WHERE id IN (
    SELECT id FROM worker_sessions WHERE closed_at < now() - interval '1 hour' LIMIT 100
)
"""

CLOSE = """
UPDATE worker_sessions SET closed_at = coalesce(closed_at, now()), goodbye = $2 WHERE id = $1
"""

NEWER_SESSION = "SELECT EXISTS (SELECT 1 FROM worker_sessions WHERE worker_id = $1 AND id > $2)"

# A worker holds at most its slots' worth of leases; more rounds if it held more.
END_BATCH = 256


class SessionRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def open(self, worker_id: str, instance_id: str) -> int:
        """Registers a session of ``worker_id`` on replica ``instance_id``; its id."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(LOCK_WORKER, worker_id)
            await conn.execute(SUPERSEDE, worker_id)
            session_id: int = await conn.fetchval(OPEN, worker_id, instance_id)
            await conn.execute(PRUNE)
            return session_id

    async def close(self, session_id: int, *, goodbye: bool) -> None:
        await self._pool.execute(CLOSE, session_id, goodbye)

    async def end_leases_unless_back(
        self, worker_id: str, session_id: int, decide: Decide
    ) -> list[FailureOutcome] | None:
        """Ends every lease of ``worker_id`` as WORKER_DISCONNECTED, unless it opened a
        session after ``session_id`` (then None: it is alive)."""
        ended: list[FailureOutcome] = []
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(LOCK_WORKER, worker_id)
            if await conn.fetchval(NEWER_SESSION, worker_id, session_id):
                return None
            while True:
                batch = await end_worker_leases(conn, worker_id, END_BATCH, decide)
                ended += batch
                if len(batch) < END_BATCH:
                    return ended
