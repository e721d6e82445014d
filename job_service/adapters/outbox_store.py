"""Outbox queries: claim a batch, mark it published, or put it back / dead-letter it.

Claims are safe across replicas: ``FOR UPDATE SKIP LOCKED`` hands each row to one claimer,
and every later write names the claimer (``locked_by``), so a dispatcher whose claim went
stale and was taken over cannot mark another's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

CLAIM = """
WITH due AS (
    SELECT id FROM outbox_events
    WHERE status = 'pending' AND available_at <= now()
    ORDER BY available_at, id LIMIT $2
    FOR UPDATE SKIP LOCKED
), stale AS (
    SELECT id FROM outbox_events
    WHERE status = 'processing' AND locked_at < now() - $3 * interval '1 second'
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events SET status = 'processing', locked_by = $1, locked_at = now(),
    attempt_count = attempt_count + 1
WHERE id IN (SELECT id FROM due UNION ALL SELECT id FROM stale)
RETURNING id, subject, dedupe_key, payload, attempt_count,
    extract(epoch FROM now() - available_at)::float8 AS due_for_s
"""

MARK_PUBLISHED = """
UPDATE outbox_events SET status = 'published', published_at = now(), locked_by = NULL,
    last_error = NULL
WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND status = 'processing'
"""

# Back to pending after a growing delay, or dead once out of attempts.
MARK_FAILED = """
UPDATE outbox_events o SET
    status = CASE WHEN o.attempt_count >= $3 THEN 'dead' ELSE 'pending' END,
    available_at = now() + least(60, 0.2 * power(2, o.attempt_count)) * interval '1 second',
    locked_by = NULL, last_error = f.error
FROM unnest($1::bigint[], $4::text[]) AS f(id, error)
WHERE o.id = f.id AND o.locked_by = $2 AND o.status = 'processing'
"""

# NATS was unreachable: the try does not count against the row, it simply waits.
RELEASE = """
UPDATE outbox_events SET status = 'pending', locked_by = NULL,
    attempt_count = greatest(attempt_count - 1, 0),
    available_at = now() + $3 * interval '1 second'
WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND status = 'processing'
"""

# Published rows are kept for diagnosis, then deleted in batches.
PRUNE = """
DELETE FROM outbox_events WHERE id IN (
    SELECT id FROM outbox_events
    WHERE status = 'published' AND published_at < now() - $1 * interval '1 second'
    LIMIT $2
)
"""


@dataclass(frozen=True)
class OutboxMessage:
    id: int
    subject: str
    dedupe_key: str
    payload: dict[str, Any]
    attempt_count: int
    # How long the row had been due when claimed (for the publish-lag histogram).
    due_for_s: float = 0.0


class OutboxStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def claim(self, owner: str, limit: int, claim_ttl_s: float) -> list[OutboxMessage]:
        rows = await self._pool.fetch(CLAIM, owner, limit, claim_ttl_s)
        return sorted((OutboxMessage(**dict(r)) for r in rows), key=lambda m: m.id)

    async def mark_published(self, owner: str, ids: Sequence[int]) -> None:
        if ids:
            await self._pool.execute(MARK_PUBLISHED, list(ids), owner)

    async def mark_failed(
        self, owner: str, failures: Sequence[tuple[int, str]], max_attempts: int
    ) -> None:
        if failures:
            ids, errors = zip(*failures, strict=True)
            await self._pool.execute(MARK_FAILED, list(ids), owner, max_attempts, list(errors))

    async def release(self, owner: str, ids: Sequence[int], delay_s: float) -> None:
        """Hands claimed rows back without counting the try (the broker was down)."""
        if ids:
            await self._pool.execute(RELEASE, list(ids), owner, delay_s)

    async def prune(self, retention_s: float, limit: int) -> int:
        """Deletes up to ``limit`` rows published longer than ``retention_s`` ago."""
        status = await self._pool.execute(PRUNE, retention_s, limit)
        return int(status.split()[-1])
