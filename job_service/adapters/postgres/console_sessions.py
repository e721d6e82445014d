"""Web console sessions on PostgreSQL (the ``console_sessions`` table)."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from job_service.domain.console_sessions import CLEAN_BATCH, KEPT_AFTER_END

# A new session, with a batch of sessions ended long ago deleted in the same statement.
OPEN = f"""
WITH cleaned AS (
    DELETE FROM console_sessions WHERE id IN (
        SELECT id FROM console_sessions
        WHERE expires_at < now() - make_interval(secs => {KEPT_AFTER_END.total_seconds()})
        ORDER BY expires_at LIMIT {CLEAN_BATCH}
    )
)
INSERT INTO console_sessions (secret_hash, principal, idle_timeout_s, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
RETURNING expires_at
"""

# Live: not closed, not past its maximum age, seen within its idle timeout.
_LIVE = """
    closed_at IS NULL AND expires_at > now()
    AND last_seen_at + make_interval(secs => idle_timeout_s) > now()
"""

TOUCH = f"""
UPDATE console_sessions SET last_seen_at = now()
WHERE secret_hash = $1 AND principal = $2 AND {_LIVE}
RETURNING expires_at
"""

CLOSE = """
UPDATE console_sessions SET closed_at = now()
WHERE secret_hash = $1 AND principal = $2 AND closed_at IS NULL
"""

REVOKE = f"""
WITH closed AS (
    UPDATE console_sessions SET closed_at = now() WHERE principal = $1 AND {_LIVE}
    RETURNING 1
)
SELECT count(*)::int FROM closed
"""


class ConsoleSessionRepository:
    """The ``ConsoleSessionStore`` port on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def open(
        self, secret_hash: str, principal: str, idle: timedelta, max_age: timedelta
    ) -> datetime:
        expires_at: datetime = await self._pool.fetchval(
            OPEN, secret_hash, principal, int(idle.total_seconds()), max_age.total_seconds()
        )
        return expires_at

    async def touch(self, secret_hash: str, principal: str) -> datetime | None:
        expires_at: datetime | None = await self._pool.fetchval(TOUCH, secret_hash, principal)
        return expires_at

    async def close(self, secret_hash: str, principal: str) -> None:
        await self._pool.execute(CLOSE, secret_hash, principal)

    async def revoke(self, principal: str) -> int:
        revoked: int = await self._pool.fetchval(REVOKE, principal)
        return revoked
