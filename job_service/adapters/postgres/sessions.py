"""Worker sessions on PostgreSQL: open (in a transaction that can end the worker's
previous process's leases), close, and, after an older worker's disconnect grace, a
transaction that ends the worker's leases unless it opened a session since (anywhere).

Every step on one worker's sessions runs under a transaction-scoped advisory lock on that
worker, so that "did it come back?" and "end its leases" cannot interleave with a new
session's registration: either the new session is committed first (nothing ends) or the
leases end first (the worker, alive after all, is fenced with LEASE_LOST).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeAlias

import asyncpg

from job_service.ports.leases import AttemptEnding
from job_service.ports.sessions import Registration

# The statements that end attempts, on this store's connection (the lease store's:
# app.py wires them, so that both run in one transaction and neither adapter imports the
# other).
EndingOn: TypeAlias = "Callable[[asyncpg.pool.PoolConnectionProxy[asyncpg.Record]], AttemptEnding]"

# One lock per worker id; the prefix keeps it apart from the claim's concurrency-key locks.
LOCK_WORKER = "SELECT pg_advisory_xact_lock(hashtextextended('worker-session:' || $1, 0))"

# A new session replaces the worker's open ones (rows a crashed replica left open).
SUPERSEDE = """
UPDATE worker_sessions SET closed_at = now() WHERE worker_id = $1 AND closed_at IS NULL
"""

# The process of the worker's latest session, read before this one is added.
PREVIOUS_INCARNATION = """
SELECT incarnation FROM worker_sessions WHERE worker_id = $1 ORDER BY id DESC LIMIT 1
"""

OPEN = """
INSERT INTO worker_sessions (worker_id, instance_id, incarnation) VALUES ($1, $2, $3)
RETURNING id
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


class SessionRepository:
    def __init__(self, pool: asyncpg.Pool, ending_on: EndingOn) -> None:
        self._pool = pool
        self._ending_on = ending_on

    @asynccontextmanager
    async def open(
        self, worker_id: str, instance_id: str, incarnation: str
    ) -> AsyncIterator[Registration]:
        """Registers a session of ``worker_id``'s process ``incarnation`` (empty: an older
        worker's) on replica ``instance_id``, committed with whatever the block ends."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(LOCK_WORKER, worker_id)
            previous: str | None = await conn.fetchval(PREVIOUS_INCARNATION, worker_id)
            await conn.execute(SUPERSEDE, worker_id)
            session_id: int = await conn.fetchval(OPEN, worker_id, instance_id, incarnation or None)
            await conn.execute(PRUNE)
            yield Registration(session_id, previous, self._ending_on(conn))

    async def close(self, session_id: int, *, goodbye: bool) -> None:
        await self._pool.execute(CLOSE, session_id, goodbye)

    @asynccontextmanager
    async def ending_leases(
        self, worker_id: str, session_id: int
    ) -> AsyncIterator[AttemptEnding | None]:
        """A transaction under ``worker_id``'s lock that ends its attempts, or None when
        it opened a session after ``session_id`` (it is alive)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(LOCK_WORKER, worker_id)
            if await conn.fetchval(NEWER_SESSION, worker_id, session_id):
                yield None
            else:
                yield self._ending_on(conn)
