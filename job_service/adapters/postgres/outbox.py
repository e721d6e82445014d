"""The outbox on PostgreSQL: the claims of the dispatcher, the reconciler's re-dispatch,
dead letters and the backlog. The rows other statements write (dispatch rows, domain
events, dedupe keys) are the vocabulary's (``vocabulary/outbox_rows.py``).

Claims are safe across replicas: ``FOR UPDATE SKIP LOCKED`` hands each row to one claimer,
and every later write names the claimer (``locked_by``), so a dispatcher whose claim went
stale and was taken over cannot mark another's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from job_service.adapters.postgres.vocabulary.holds import LIVE_WORKER_S, held
from job_service.adapters.postgres.vocabulary.outbox_rows import (
    CREATE_TRACE,
    DISPATCH_EVENT,
    dispatch_key,
    dispatch_rows,
)
from job_service.domain.lifecycle import LOCKABLE, status_values
from job_service.domain.outbox import UNPUBLISHED, DeadEvent, OutboxMessage, OutboxStatus

_PENDING, _PROCESSING = OutboxStatus.PENDING.value, OutboxStatus.PROCESSING.value
_PUBLISHED, _DEAD = OutboxStatus.PUBLISHED.value, OutboxStatus.DEAD.value

CLAIM = f"""
WITH due AS (
    SELECT id FROM outbox_events
    WHERE status = '{_PENDING}' AND available_at <= now()
    ORDER BY available_at, id LIMIT $2
    FOR UPDATE SKIP LOCKED
), stale AS (
    SELECT id FROM outbox_events
    WHERE status = '{_PROCESSING}' AND locked_at < now() - $3 * interval '1 second'
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events SET status = '{_PROCESSING}', locked_by = $1, locked_at = now(),
    attempt_count = attempt_count + 1
WHERE id IN (SELECT id FROM due UNION ALL SELECT id FROM stale)
RETURNING id, subject, dedupe_key, payload, attempt_count,
    extract(epoch FROM now() - available_at)::float8 AS due_for_s
"""

MARK_PUBLISHED = f"""
UPDATE outbox_events SET status = '{_PUBLISHED}', published_at = now(), locked_by = NULL,
    last_error = NULL
WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND status = '{_PROCESSING}'
"""

# Back to pending after a growing delay, or dead once out of attempts.
MARK_FAILED = f"""
UPDATE outbox_events o SET
    status = CASE WHEN o.attempt_count >= $3 THEN '{_DEAD}' ELSE '{_PENDING}' END,
    available_at = now() + least(60, 0.2 * power(2, o.attempt_count)) * interval '1 second',
    locked_by = NULL, last_error = f.error
FROM unnest($1::bigint[], $4::text[]) AS f(id, error)
WHERE o.id = f.id AND o.locked_by = $2 AND o.status = '{_PROCESSING}'
"""

# NATS was unreachable: the try does not count against the row, it simply waits.
RELEASE = f"""
UPDATE outbox_events SET status = '{_PENDING}', locked_by = NULL,
    attempt_count = greatest(attempt_count - 1, 0),
    available_at = now() + $3 * interval '1 second'
WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND status = '{_PROCESSING}'
"""

# Published rows are kept for diagnosis, then deleted in batches.
PRUNE = f"""
DELETE FROM outbox_events WHERE id IN (
    SELECT id FROM outbox_events
    WHERE status = '{_PUBLISHED}' AND published_at < now() - $1 * interval '1 second'
    LIMIT $2
)
"""

# Waiting jobs whose dispatch message may be lost (NATS lost its store, or a message
# vanished) or whose dispatch row died: queued, or retrying and due, untouched for $1 s,
# with no dispatch row still pending or processing (that one is the dispatcher's
# business), and not held back (a paused queue, a full concurrency key, no live worker of
# its version: a token would be dropped or handed back unused, and each hold has its own
# way back to the job when it lifts; ``vocabulary/holds.py``). Each gets a new dispatch
# row and its updated_at moved, so the next round passes it over for another $1 s. SKIP
# LOCKED and that re-check keep concurrent replicas from re-dispatching one job twice; a
# duplicate would be harmless anyway (LockJobs grants a job once).
REDISPATCH_STRANDED = f"""
WITH stranded AS (
    SELECT j.id FROM jobs j
    WHERE j.status = ANY($3::text[])
      AND greatest(j.updated_at, j.next_run_at) < now() - $1 * interval '1 second'
      AND NOT EXISTS (
          SELECT 1 FROM outbox_events o
          WHERE o.status = '{_PENDING}' AND o.event_type = '{DISPATCH_EVENT}'
            AND o.aggregate_id = j.id::text)
      AND NOT EXISTS (
          SELECT 1 FROM outbox_events o
          WHERE o.status = '{_PROCESSING}' AND o.event_type = '{DISPATCH_EVENT}'
            AND o.aggregate_id = j.id::text)
      AND NOT {held("j", "$4")}
    ORDER BY j.updated_at LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
), touched AS (
    UPDATE jobs j SET updated_at = now() FROM stranded WHERE j.id = stranded.id
    RETURNING j.id, j.queue, j.attempt_count
), dispatch AS (
    {
    dispatch_rows(
        "touched",
        dispatch_key("src.id", "redispatch", "(extract(epoch FROM now()) * 1000000)::bigint"),
        attempt="src.attempt_count + 1",
        trace=CREATE_TRACE,
    )
}
    ON CONFLICT (dedupe_key) DO NOTHING
    RETURNING aggregate_id
)
SELECT count(*) FROM dispatch
"""

DEAD_EVENTS = f"""
SELECT id, aggregate_id, subject, attempt_count, last_error, created_at FROM outbox_events
WHERE status = '{_DEAD}' AND ($1::bigint IS NULL OR id < $1)
ORDER BY id DESC LIMIT $2
"""

# Dead rows become pending again with a fresh attempt budget; the dispatcher takes them.
REDRIVE = f"""
UPDATE outbox_events SET status = '{_PENDING}', attempt_count = 0, available_at = now(),
    locked_by = NULL, locked_at = NULL
WHERE status = '{_DEAD}' AND ($1::bigint[] IS NULL OR id = ANY($1::bigint[]))
"""

BACKLOG = f"""
SELECT status, count(*) AS n,
       extract(epoch FROM now() - min(available_at) FILTER (WHERE available_at <= now()))
           ::float8 AS oldest_due_s
FROM outbox_events
WHERE status IN ({", ".join(f"'{s.value}'" for s in UNPUBLISHED)})
GROUP BY status
"""


class OutboxRepository:
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

    async def redispatch_stranded(self, after_s: float, limit: int) -> int:
        """Writes a new dispatch row for up to ``limit`` waiting jobs that nothing has
        touched for ``after_s`` seconds although their dispatch left the outbox (see
        REDISPATCH_STRANDED); returns how many. Safe across replicas."""
        count: int = await self._pool.fetchval(
            REDISPATCH_STRANDED, after_s, limit, status_values(LOCKABLE), LIVE_WORKER_S
        )
        return count

    async def dead_events(self, before_id: int | None, limit: int) -> list[DeadEvent]:
        rows = await self._pool.fetch(DEAD_EVENTS, before_id, limit)
        return [
            DeadEvent(
                id=r["id"],
                job_id=r["aggregate_id"],
                subject=r["subject"],
                attempts=r["attempt_count"],
                last_error=r["last_error"],
                created_at=r["created_at"],
            )
            for r in rows
        ]

    async def redrive(self, event_ids: Sequence[int] | None) -> int:
        """Dead events (these, or all when None) made pending again; how many."""
        status = await self._pool.execute(REDRIVE, None if event_ids is None else list(event_ids))
        return int(status.rsplit(" ", 1)[-1])

    async def backlog(self) -> dict[OutboxStatus, tuple[int, float | None]]:
        """Per unpublished status: (rows, seconds the oldest due row has waited)."""
        rows: dict[str, Any] = {r["status"]: r for r in await self._pool.fetch(BACKLOG)}
        return {
            s: (rows[s]["n"], rows[s]["oldest_due_s"]) if s in rows else (0, None)
            for s in UNPUBLISHED
        }
