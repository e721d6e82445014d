"""Claims on PostgreSQL: the statements of a claim (the claims use case runs the sequence
and decides; ``domain/claims.py`` is the policy), on one connection, mostly in one
transaction.

1. Candidates: the queue's waiting jobs in line order (``jobs_claim``: queue, sched_key),
   due, of a definition the worker runs, not in a paused queue, and whose concurrency key
   did not look full; ``FOR UPDATE SKIP LOCKED`` so concurrent claims take different rows.
   (Or, for a worker that names its jobs, those jobs, waiting for their row locks.)
2. Concurrency keys of the candidates (and the queue's, when it has a limit): an advisory
   lock per key, in one order, then a count of what runs per key in a fresh statement —
   two replicas cannot both fill a key's last slot.
3. Rate limits: each tier's token bucket row is refilled and spent for the admitted jobs of
   that tier (the row lock serialises the tier's claims).
4. The grant: the admitted jobs become RUNNING with a fresh lease, their timeline events
   written, their snapshots returned (``vocabulary/grants.py``).

A job's place in line, which the scan follows, is the vocabulary's (``vocabulary/line.py``);
so is a bucket's refill and recovery (``vocabulary/buckets.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

import asyncpg

from job_service.adapters.postgres.vocabulary import buckets
from job_service.adapters.postgres.vocabulary.grants import grant, granted
from job_service.adapters.postgres.vocabulary.statuses import WAITING, statuses_sql
from job_service.domain.claims import ClaimCandidate, Granted, WaitingLeft, queue_key
from job_service.domain.lifecycle import LEASED
from job_service.domain.outbox import DispatchMark
from job_service.domain.rate_limits import CALL_QUEUE_AHEAD_S, BucketLevel, RateLimit

_LEASED = statuses_sql(LEASED)
DUE = "(j.next_run_at IS NULL OR j.next_run_at <= now())"
# A key is skipped by the scan when it already runs its limit (the statement's snapshot:
# a hint; the count under the key's advisory lock decides). Computed once per scan over the
# running jobs, not per candidate: a held-back backlog at the front of the line stays cheap.
KEY_ROOM = f"""(j.concurrency_key IS NULL OR j.concurrency_key <> ALL(ARRAY(
    SELECT r.concurrency_key FROM jobs r
    WHERE r.status IN {_LEASED} AND r.concurrency_key IS NOT NULL
    GROUP BY r.concurrency_key HAVING count(*) >= max(r.concurrency_limit))))"""
_CANDIDATE_COLUMNS = "j.id::text AS id, j.concurrency_key, j.concurrency_limit, j.model_tier"

# A queue's waiting jobs a worker may be granted now: $1 queue, $2 the definitions it runs
# (NULL: any).
ELIGIBLE = f"""j.queue = $1 AND j.status IN {WAITING} AND {DUE}
  AND ($2::text[] IS NULL OR j.job_type || '@' || j.definition_version = ANY($2::text[]))
  AND NOT EXISTS (SELECT 1 FROM queue_controls q WHERE q.queue = $1 AND q.paused)"""


def due_for(seconds: str) -> str:
    """Due for ``seconds`` (SQL) at least, 0: any due job (lock on submit: the backlog)."""
    return f"""({seconds}::float8 = 0
  OR coalesce(j.next_run_at, j.queued_at) <= now() - {seconds}::float8 * interval '1 second')"""


# $3 how many, $4 tiers known spent, $5 seconds due at least.
QUEUE_CANDIDATES = f"""
SELECT {_CANDIDATE_COLUMNS} FROM jobs j
WHERE {ELIGIBLE} AND {due_for("$5")}
  AND (j.model_tier IS NULL OR j.model_tier <> ALL($4::text[]))
  AND {KEY_ROOM}
ORDER BY j.sched_key
LIMIT $3
FOR UPDATE OF j SKIP LOCKED
"""

# Named jobs (a worker that predates the scheduler), waiting for a concurrent writer rather
# than skipping a row whose dispatch would then be dropped; rows in id order (no deadlock).
# $2 the definitions the worker runs (NULL: any): a job of another is not runnable by it.
NAMED_CANDIDATES = f"""
SELECT {_CANDIDATE_COLUMNS}, j.queue,
       ($2::text[] IS NULL OR j.job_type || '@' || j.definition_version = ANY($2::text[]))
           AS runnable
FROM jobs j
WHERE j.id = ANY($1::text[]::uuid[]) AND j.status IN {WAITING} AND {DUE}
  AND NOT EXISTS (SELECT 1 FROM queue_controls q WHERE q.queue = j.queue AND q.paused)
ORDER BY j.id
FOR UPDATE OF j
"""

LOCK_KEYS = """
SELECT pg_advisory_xact_lock(h) FROM (
    SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest($1::text[]) k ORDER BY 1
) keys
"""

# In a statement of its own: its snapshot sees every claim that held these keys' locks.
RUNNING_BY_KEY = f"""
SELECT concurrency_key AS key, count(*) AS running FROM jobs
WHERE concurrency_key = ANY($1::text[]) AND status IN {_LEASED}
  AND concurrency_key IS NOT NULL
GROUP BY concurrency_key
UNION ALL
SELECT 'queue:' || queue, count(*) FROM jobs
WHERE queue = ANY($2::text[]) AND status IN {_LEASED}
GROUP BY queue
"""


# The admitted jobs ($1, locked by this transaction) with the tokens each reserved ($4);
# $5/$6 the dispatch rows to mark (a pushed grant's).
GRANT = grant(
    f"""
    SELECT j.id, j.status, coalesce(j.next_run_at, j.queued_at) AS due_at, r.tokens
    FROM jobs j JOIN unnest($1::text[]::uuid[], $4::int[]) AS r(id, tokens) ON r.id = j.id
    WHERE j.status IN {WAITING}""",
    worker="$2",
    ttl_ms="$3",
    mark_ids="$5",
    mark_owner="$6",
)

# A queue where nothing can hold a job back (no limit, no keyed or rate-limited job type):
# candidates and grant in one statement, as before the scheduler. $3 how many, $4 worker,
# $5 lease milliseconds, $6 seconds due at least, $7/$8 the dispatch rows to mark.
GRANT_UNLIMITED = grant(
    f"""
    SELECT j.id, j.status, coalesce(j.next_run_at, j.queued_at) AS due_at, NULL::int AS tokens
    FROM jobs j WHERE {ELIGIBLE} AND {due_for("$6")}
    ORDER BY j.sched_key LIMIT $3
    FOR UPDATE OF j SKIP LOCKED""",
    worker="$4",
    ttl_ms="$5",
    mark_ids="$7",
    mark_owner="$8",
)

# Why a named job was not granted: when it is due (not due yet), or none.
NOT_DUE = f"""
SELECT id::text AS id, next_run_at FROM jobs
WHERE id = ANY($1::text[]::uuid[]) AND status IN {WAITING} AND next_run_at > now()
"""

# What still waits in the queue, read without locks (rows other claims hold are seen):
# due jobs this worker could be granted, and due jobs of definitions it does not run.
WAITING_LEFT = f"""
SELECT
    EXISTS (SELECT 1 FROM jobs j WHERE {ELIGIBLE} AND {KEY_ROOM}) AS mine,
    $2::text[] IS NOT NULL AND EXISTS (
        SELECT 1 FROM jobs j
        WHERE j.queue = $1 AND j.status IN {WAITING} AND {DUE}
          AND NOT (j.job_type || '@' || j.definition_version = ANY($2::text[]))
    ) AS others
"""

RATE_HELD_WAIT = f"""
SELECT EXISTS (
    SELECT 1 FROM jobs j
    WHERE j.queue = $1 AND j.status IN {WAITING} AND {DUE} AND j.model_tier = ANY($2::text[]))
"""


_REQUESTS = {"per_minute": "$3", "capacity": "$5", "factor": "factor"}
_TOKENS = {"per_minute": "$4", "capacity": "$6", "factor": "factor"}

# A tier's bucket, refilled for the time since its last refill (at the configured rates
# times the back-off factor) and spent on the leading grants that fit. $1 tier, $2 recovery
# seconds, $3 rpm, $4 tpm (0: none), $5/$6 bucket sizes, $7 the tokens each wanted job
# reserves, one element per job in line order. A 429's block sets refilled_at at its end:
# no refill and no recovery before it. Nothing is granted either while the tier's calls wait
# for slots more than $8 seconds ahead (call_permits): attempts are admitted at the pace
# their calls are. The clock, not now(): a claim that waited must not hand on its wait.
RESERVE = f"""
WITH bucket AS (
    SELECT key, requests_available, tokens_available,
           greatest(blocked_until, (SELECT c.next_at - $8 * interval '1 second'
                                    FROM call_permits c WHERE c.key = $1)) AS blocked_until,
           {buckets.elapsed("refilled_at", "clock_timestamp()")} AS elapsed,
           clock_timestamp() AS at, factor
    FROM rate_limits WHERE key = $1
    FOR UPDATE
), level AS (
    SELECT key, blocked_until, at,
           {buckets.recovered("factor", "elapsed", "$2")} AS f,
           {buckets.refilled("requests_available", "elapsed", **_REQUESTS)} AS req,
           CASE WHEN $4 > 0 THEN {buckets.refilled("tokens_available", "elapsed", **_TOKENS)}
                ELSE 'Infinity'::float8 END AS tok
    FROM bucket
), fits AS (
    SELECT count(e.ord) AS n, coalesce(max(e.spent), 0) AS tokens
    FROM level LEFT JOIN LATERAL (
        SELECT ord, sum(est) OVER (ORDER BY ord) AS spent
        FROM unnest($7::int[]) WITH ORDINALITY AS x(est, ord)
    ) e ON (level.blocked_until IS NULL OR level.blocked_until <= level.at)
       AND e.ord <= floor(level.req) AND e.spent <= level.tok
)
UPDATE rate_limits r SET
    requests_available = level.req - fits.n,
    tokens_available = CASE WHEN level.tok = 'Infinity' THEN 0 ELSE level.tok - fits.tokens END,
    factor = level.f, refilled_at = greatest(level.at, r.refilled_at)
FROM level, fits WHERE r.key = level.key
RETURNING fits.n AS granted, r.requests_available, level.tok - fits.tokens AS tokens_left,
          r.factor, level.blocked_until
"""

# What worker $1 runs of the job types $2 (one queue's, the queue it claims from) is $3;
# what it was recorded to run of other types stays.
RECORD_WORKER = """
INSERT INTO worker_definitions AS w (worker_id, definitions, seen_at) VALUES ($1, $3, now())
ON CONFLICT (worker_id) DO UPDATE SET seen_at = now(), definitions = ARRAY(
    SELECT d FROM unnest(w.definitions) d WHERE split_part(d, '@', 1) <> ALL($2::text[])
) || EXCLUDED.definitions
"""


class ClaimRepository:
    """Claims on one asyncpg pool: a claim transaction per claim."""

    def __init__(self, pool: asyncpg.Pool, *, lease_ttl_s: float) -> None:
        self._pool = pool
        self._lease_ttl_ms = lease_ttl_s * 1000

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[ClaimStatements]:
        async with self._pool.acquire() as conn, conn.transaction():
            yield ClaimStatements(conn, self._lease_ttl_ms)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[ClaimStatements]:
        async with self._pool.acquire() as conn:
            yield ClaimStatements(conn, self._lease_ttl_ms)

    async def record_worker(
        self, worker_id: str, job_types: Sequence[str], definitions: Sequence[str]
    ) -> None:
        await self._pool.execute(RECORD_WORKER, worker_id, list(job_types), list(definitions))


class ClaimStatements:
    """A claim transaction (``ports/claims.py``) on one connection."""

    def __init__(
        self, conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], lease_ttl_ms: float
    ) -> None:
        self._conn = conn
        self._lease_ttl_ms = lease_ttl_ms

    async def candidates(
        self,
        queue: str,
        definitions: Sequence[str] | None,
        limit: int,
        spent_tiers: Sequence[str],
        due_for_s: float = 0.0,
    ) -> list[ClaimCandidate]:
        rows = await self._conn.fetch(
            QUEUE_CANDIDATES, queue, _listed(definitions), limit, list(spent_tiers), due_for_s
        )
        return [_candidate(row) for row in rows]

    async def named_candidates(
        self, job_ids: Sequence[str], definitions: Sequence[str] | None
    ) -> list[tuple[str, ClaimCandidate, bool]]:
        rows = await self._conn.fetch(NAMED_CANDIDATES, list(job_ids), _listed(definitions))
        return [(row["queue"], _candidate(row), row["runnable"]) for row in rows]

    async def count_running(self, keys: Sequence[str], queues: Sequence[str]) -> dict[str, int]:
        await self._conn.execute(LOCK_KEYS, list(keys))
        counted = {queue_key(queue) for queue in queues}
        rows = await self._conn.fetch(
            RUNNING_BY_KEY, [k for k in keys if k not in counted], list(queues)
        )
        return {r["key"]: r["running"] for r in rows}

    async def reserve(
        self, limit: RateLimit, recovery_s: float, tokens: Sequence[int]
    ) -> BucketLevel | None:
        row = await self._conn.fetchrow(
            RESERVE,
            limit.key,
            recovery_s,
            limit.requests_per_minute,
            limit.tokens_per_minute,
            limit.request_burst,
            limit.token_burst,
            list(tokens),
            CALL_QUEUE_AHEAD_S,
        )
        if row is None:
            return None
        return BucketLevel(
            granted=int(row["granted"]),
            requests_available=row["requests_available"],
            tokens_left=row["tokens_left"],
            factor=row["factor"],
            blocked_until=row["blocked_until"],
        )

    async def grant(
        self, chosen: Sequence[tuple[str, int]], worker_id: str, mark: DispatchMark | None = None
    ) -> list[Granted]:
        rows = await self._conn.fetch(
            GRANT,
            [job_id for job_id, _ in chosen],
            worker_id,
            self._lease_ttl_ms,
            [tokens or None for _, tokens in chosen],
            *_marking(mark),
        )
        return [granted(row) for row in rows]

    async def grant_unlimited(
        self,
        queue: str,
        definitions: Sequence[str] | None,
        want: int,
        worker_id: str,
        due_for_s: float = 0.0,
        mark: DispatchMark | None = None,
    ) -> list[Granted]:
        rows = await self._conn.fetch(
            GRANT_UNLIMITED,
            queue,
            _listed(definitions),
            want,
            worker_id,
            self._lease_ttl_ms,
            due_for_s,
            *_marking(mark),
        )
        return [granted(row) for row in rows]

    async def not_due(self, job_ids: Sequence[str]) -> dict[str, datetime]:
        rows = await self._conn.fetch(NOT_DUE, list(job_ids))
        return {r["id"]: r["next_run_at"] for r in rows}

    async def rate_held(self, queue: str, spent_tiers: Sequence[str]) -> bool:
        return bool(await self._conn.fetchval(RATE_HELD_WAIT, queue, list(spent_tiers)))

    async def waiting_left(self, queue: str, definitions: Sequence[str] | None) -> WaitingLeft:
        row = await self._conn.fetchrow(WAITING_LEFT, queue, _listed(definitions))
        assert row is not None
        return WaitingLeft(mine=row["mine"], others=row["others"])


def _marking(mark: DispatchMark | None) -> tuple[list[int] | None, str | None]:
    return (list(mark.ids), mark.owner) if mark is not None else (None, None)


def _listed(definitions: Sequence[str] | None) -> list[str] | None:
    return list(definitions) if definitions is not None else None


def _candidate(row: asyncpg.Record) -> ClaimCandidate:
    return ClaimCandidate(
        job_id=row["id"],
        concurrency_key=row["concurrency_key"],
        concurrency_limit=row["concurrency_limit"] or 0,
        rate_key=row["model_tier"],
    )
