"""Users' data keys on PostgreSQL (``user_data_keys``, migration 0050): the DataKeyStore.
A key is added once (the first writer wins, a concurrent one reads it), re-wrapped by a
compare-and-set on its wrapping, and deleted by an erase."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from job_service.ports.key_encryption import WrappedKey

FIND_KEY = "SELECT kek_id, wrapped FROM user_data_keys WHERE user_id = $1"

# The first writer's key stays; the statement returns it whoever wrote it. A second
# writer's insert waits for the first to commit (the primary key) and then sees its row.
ADD_KEY = """
WITH added AS (
    INSERT INTO user_data_keys (user_id, kek_id, wrapped) VALUES ($1, $2, $3)
    ON CONFLICT (user_id) DO NOTHING
    RETURNING kek_id, wrapped
)
SELECT kek_id, wrapped FROM added
UNION ALL
SELECT kek_id, wrapped FROM user_data_keys WHERE user_id = $1 AND NOT EXISTS (SELECT FROM added)
"""

DESTROY_KEY = "DELETE FROM user_data_keys WHERE user_id = $1"

WRAPPED_ELSEWHERE = """
SELECT user_id, kek_id, wrapped FROM user_data_keys
WHERE kek_id <> $1 ORDER BY user_id LIMIT $2
"""

COUNT_WRAPPED_ELSEWHERE = "SELECT count(*) FROM user_data_keys WHERE kek_id <> $1"

REWRAP_KEY = """
UPDATE user_data_keys SET kek_id = $4, wrapped = $5, rewrapped_at = now()
WHERE user_id = $1 AND kek_id = $2 AND wrapped = $3
"""


class DataKeyRepository:
    """The DataKeyStore on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def find(self, user_id: str) -> WrappedKey | None:
        row = await self._pool.fetchrow(FIND_KEY, user_id)
        return None if row is None else WrappedKey(row["kek_id"], bytes(row["wrapped"]))

    async def add(self, user_id: str, wrapped: WrappedKey) -> WrappedKey:
        row = await self._pool.fetchrow(ADD_KEY, user_id, wrapped.kek_id, wrapped.blob)
        if row is None:  # erased between the insert's conflict and the read: add again
            return await self.add(user_id, wrapped)
        return WrappedKey(row["kek_id"], bytes(row["wrapped"]))

    async def destroy(self, user_id: str) -> bool:
        return await self._pool.execute(DESTROY_KEY, user_id) != "DELETE 0"

    async def wrapped_elsewhere(self, kek_id: str, limit: int) -> Sequence[tuple[str, WrappedKey]]:
        rows = await self._pool.fetch(WRAPPED_ELSEWHERE, kek_id, limit)
        return [(r["user_id"], WrappedKey(r["kek_id"], bytes(r["wrapped"]))) for r in rows]

    async def count_wrapped_elsewhere(self, kek_id: str) -> int:
        count: int = await self._pool.fetchval(COUNT_WRAPPED_ELSEWHERE, kek_id)
        return count

    async def rewrap(self, user_id: str, old: WrappedKey, new: WrappedKey) -> bool:
        done = await self._pool.execute(
            REWRAP_KEY, user_id, old.kek_id, old.blob, new.kek_id, new.blob
        )
        return done != "UPDATE 0"
