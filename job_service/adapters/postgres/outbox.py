"""The outbox on PostgreSQL: the row templates other statements embed, the dedupe keys,
the claims of the dispatcher, the reconciler's re-dispatch, dead letters and the backlog.

Claims are safe across replicas: ``FOR UPDATE SKIP LOCKED`` hands each row to one claimer,
and every later write names the claimer (``locked_by``), so a dispatcher whose claim went
stale and was taken over cannot mark another's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from job_service.domain.lifecycle import LOCKABLE, status_values
from job_service.domain.outbox import UNPUBLISHED, DeadEvent, OutboxMessage, OutboxStatus
from shared.constants import DISPATCH_SUBJECT_PREFIX, EVENTS_SUBJECT_PREFIX

_PENDING, _PROCESSING = OutboxStatus.PENDING.value, OutboxStatus.PROCESSING.value
_PUBLISHED, _DEAD = OutboxStatus.PUBLISHED.value, OutboxStatus.DEAD.value
DISPATCH_EVENT = "job.dispatch"


def dispatch_key(job_id: str, cause: str, suffix: str = "") -> str:
    """The SQL of a dispatch row's dedupe key (the ``Nats-Msg-Id``), from SQL expressions:
    ``job.dispatch:<job id>:create`` for a new job, ``…:retry:<lease token>`` for each
    retry (unique per attempt, even a refunded one), ``…:redispatch:<µs>`` for the
    reconciler."""
    key = f"'{DISPATCH_EVENT}:' || {job_id} || ':{cause}'"
    return f"{key} || ':' || {suffix}" if suffix else key


# Inserts the dispatch row of each job in `src` (a CTE with id, queue), available at
# `available_at`, deduplicated by `dedupe`. `trace` is a jsonb trace-context carrier or
# NULL: kept in the payload under "trace", sent as NATS headers. `owner`: see `_insert`.
def dispatch_rows(
    src: str,
    dedupe: str,
    *,
    attempt: str = "1",
    available_at: str = "now()",
    trace: str,
    owner: str | None = None,
) -> str:
    return _insert(
        f"""SELECT '{DISPATCH_EVENT}', 'job', src.id::text, {dedupe},
           '{DISPATCH_SUBJECT_PREFIX}.' || src.queue,
           jsonb_strip_nulls(jsonb_build_object('job_id', src.id::text, 'attempt', {attempt},
                                                'trace', {trace})),
           {available_at}""",
        src,
        available_at,
        owner,
    )


def domain_event_rows(src: str, *, owner: str | None = None) -> str:
    """Inserts the domain event of each job in `src` (a CTE with id, job_type and a
    terminal status), for other services: subject jobs.events.<type>.<status>. `owner`:
    see `_insert`."""
    return _insert(
        f"""SELECT 'job.' || src.status, 'job', src.id::text, 'job.' || src.status || ':' || src.id,
           '{EVENTS_SUBJECT_PREFIX}.' || src.job_type || '.' || src.status,
           jsonb_build_object('job_id', src.id::text, 'job_type', src.job_type,
                              'status', src.status),
           now()""",
        src,
        "now()",
        owner,
    )


def _insert(values: str, src: str, available_at: str, owner: str | None) -> str:
    """The outbox INSERT of ``values``, a row per row of ``src``.

    With ``owner`` (SQL: a replica's id, or NULL for none) the rows due at once are written
    already claimed by that replica's dispatcher, as its claim would leave them, and
    returned: the statement's caller hands them to that dispatcher once they have committed
    (``handed``), which publishes them without a claim statement and without waiting for
    one. A replica that dies before publishing them leaves them to the stale-claim
    takeover, like rows it had claimed."""
    columns = "event_type, aggregate_type, aggregate_id, dedupe_key, subject, payload, available_at"
    if owner is None:
        return f"""
    INSERT INTO outbox_events ({columns})
    {values}
    FROM {src} src
"""
    claimed = f"({owner} IS NOT NULL AND {available_at} <= now())"
    return f"""
    INSERT INTO outbox_events ({columns}, status, locked_by, locked_at, attempt_count)
    {values},
           CASE WHEN {claimed} THEN '{_PROCESSING}' ELSE '{_PENDING}' END,
           CASE WHEN {claimed} THEN {owner} END,
           CASE WHEN {claimed} THEN now() END,
           CASE WHEN {claimed} THEN 1 ELSE 0 END
    FROM {src} src
    RETURNING id, subject, dedupe_key, payload, attempt_count, status
"""


def handed(first_row: str, *ctes: str) -> str:
    """The ``handed`` column: the rows the outbox INSERTs ``ctes`` (written with an
    ``owner``) claimed, as one jsonb array on the row where ``first_row`` (SQL) holds and
    NULL on the others (a statement answers a row per job: each would decode them all
    again), for ``handed_messages``."""
    rows = " UNION ALL ".join(
        f"SELECT id, subject, dedupe_key, payload, attempt_count FROM {cte}"
        f" WHERE status = '{_PROCESSING}'"
        for cte in ctes
    )
    return (
        f"CASE WHEN {first_row} THEN (SELECT jsonb_agg(to_jsonb(h)) FROM ({rows}) h) END AS handed"
    )


def handed_messages(rows: Sequence[asyncpg.Record]) -> list[OutboxMessage]:
    """The messages of the ``handed`` column of a statement's rows, in id order."""
    messages = (OutboxMessage(**m) for r in rows for m in r["handed"] or ())
    return sorted(messages, key=lambda m: m.id)


# A later dispatch of `src` continues the job's trace: the create row's context (while
# that row is kept).
CREATE_TRACE = f"""(SELECT o.payload->'trace' FROM outbox_events o
    WHERE o.dedupe_key = {dispatch_key("src.id", "create")})"""

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
# and with no dispatch row still pending or processing (that one is the dispatcher's
# business). Each gets a new dispatch row and its updated_at moved, so the next round
# passes it over for another $1 s. SKIP LOCKED and that re-check keep concurrent replicas
# from re-dispatching one job twice; a duplicate would be harmless anyway (LockJobs grants
# a job once).
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
            REDISPATCH_STRANDED, after_s, limit, status_values(LOCKABLE)
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
