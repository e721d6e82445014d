"""Claims on PostgreSQL: the scheduler's grant of waiting jobs to a worker, one transaction.

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
   written, their snapshots returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import asyncpg

from job_service import metrics
from job_service.adapters.postgres.outbox import dispatch_key, dispatch_rows
from job_service.adapters.postgres.rate_limits import RateLimitRepository
from job_service.domain.lifecycle import LEASED, LOCKABLE, statuses_sql
from job_service.domain.models import LockGrant, LockRefusal, QueueClaim
from job_service.domain.scheduling import (
    DEFAULT_FAIR_QUANTUM_S,
    DEFAULT_PRIORITY_STEP_S,
    VERSION_RECHECK_S,
    Candidate,
    admit,
    keys_to_count,
    queue_key,
    rate_demand,
    within_rate,
)
from shared.credentials import CredentialMode

WAITING = statuses_sql(LOCKABLE)
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

# $3 how many, $4 tiers known spent.
QUEUE_CANDIDATES = f"""
SELECT {_CANDIDATE_COLUMNS} FROM jobs j
WHERE {ELIGIBLE}
  AND (j.model_tier IS NULL OR j.model_tier <> ALL($4::text[]))
  AND {KEY_ROOM}
ORDER BY j.sched_key
LIMIT $3
FOR UPDATE OF j SKIP LOCKED
"""

# Named jobs (a worker that predates the scheduler), waiting for a concurrent writer rather
# than skipping a row whose dispatch would then be dropped; rows in id order (no deadlock).
NAMED_CANDIDATES = f"""
SELECT {_CANDIDATE_COLUMNS}, j.queue FROM jobs j
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


def grant(prior: str, worker: str, ttl_ms: str) -> str:
    """The grant of the jobs ``prior`` selects (id, status, due_at, tokens; locked): each
    RUNNING with a fresh lease, its timeline event, its snapshot returned in line order."""
    return f"""
WITH prior AS ({prior}
), locked AS (
    UPDATE jobs j SET status = 'running', locked_by = {worker}, locked_at = now(),
        lock_until = now() + {ttl_ms} * interval '1 millisecond',
        lease_token = gen_random_uuid(),
        attempt_count = j.attempt_count + 1, started_at = coalesce(j.started_at, now()),
        next_run_at = NULL, progress = 0, updated_at = now(), reserved_tokens = prior.tokens
    FROM prior WHERE j.id = prior.id
    RETURNING j.id, j.job_type, j.user_id, j.lease_token::text AS lease_token,
              j.attempt_count, j.lock_until, j.prompt_key, j.prompt_version,
              prior.status AS from_status, j.credential_mode,
              j.credential_id::text AS credential_id,
              extract(epoch FROM now() - prior.due_at)::float8 AS waited_s, j.sched_key
), event AS (
    -- the time of the grant itself, not of the transaction's start: a claim may wait for a
    -- key's lock, and its timeline must not show it running before the job it waited for
    -- ended
    INSERT INTO job_events (job_id, from_status, to_status, attempt, worker_id, created_at)
    SELECT id, from_status, 'running', attempt_count, {worker}, clock_timestamp() FROM locked
)
SELECT l.id::text AS id, l.job_type, l.user_id, l.lease_token, l.attempt_count, l.lock_until,
       l.prompt_key, l.prompt_version, s.payload, l.credential_mode, l.credential_id, l.waited_s,
       EXISTS (SELECT 1 FROM job_steps st WHERE st.job_id = l.id) AS has_steps
FROM locked l JOIN job_snapshots s ON s.job_id = l.id
ORDER BY l.sched_key
"""


# The admitted jobs ($1, locked by this transaction) with the tokens each reserved ($4).
GRANT = grant(
    f"""
    SELECT j.id, j.status, coalesce(j.next_run_at, j.queued_at) AS due_at, r.tokens
    FROM jobs j JOIN unnest($1::text[]::uuid[], $4::int[]) AS r(id, tokens) ON r.id = j.id
    WHERE j.status IN {WAITING}""",
    worker="$2",
    ttl_ms="$3",
)

# A queue where nothing can hold a job back (no limit, no keyed or rate-limited job type):
# candidates and grant in one statement, as before the scheduler. $3 how many, $4 worker,
# $5 lease milliseconds.
GRANT_UNLIMITED = grant(
    f"""
    SELECT j.id, j.status, coalesce(j.next_run_at, j.queued_at) AS due_at, NULL::int AS tokens
    FROM jobs j WHERE {ELIGIBLE}
    ORDER BY j.sched_key LIMIT $3
    FOR UPDATE OF j SKIP LOCKED""",
    worker="$4",
    ttl_ms="$5",
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

RECORD_WORKER = """
INSERT INTO worker_definitions (worker_id, definitions, seen_at) VALUES ($1, $2, now())
ON CONFLICT (worker_id) DO UPDATE SET definitions = EXCLUDED.definitions, seen_at = now()
"""

# A worker's definitions are written at most this often (each claim would otherwise).
WORKER_RECORD_INTERVAL_S = 5.0
# Candidates read per token: spares for the ones the limits hold back.
CANDIDATE_SLACK = 2
# A token left unused while grantable jobs still wait (locked by a concurrent claim) comes
# back this soon.
CONTENDED_RECHECK_S = 0.05


class ClaimRepository:
    """Claims on one asyncpg pool, under the queues' limits and the tiers' rate limits."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        rates: RateLimitRepository,
        *,
        lease_ttl_s: float,
        queue_limits: Mapping[str, int],
        estimated_tokens: Mapping[str, int],
        unlimited_queues: frozenset[str] = frozenset(),
    ) -> None:
        """``estimated_tokens``: per model tier, the tokens a grant reserves (the largest
        estimate of the tier's job types). ``unlimited_queues``: queues no limit applies to
        (no queue limit, no keyed or rate-limited job type), claimed in one statement."""
        self._pool = pool
        self._rates = rates
        self._lease_ttl_ms = lease_ttl_s * 1000
        self._queue_limits = dict(queue_limits)
        self._estimated_tokens = dict(estimated_tokens)
        self._unlimited = unlimited_queues
        self._workers_seen: dict[tuple[str, tuple[str, ...]], float] = {}

    async def claim_queue(
        self, queue: str, want: int, worker_id: str, runnable: Sequence[str] | None
    ) -> QueueClaim:
        """Grants up to ``want`` of the queue's best eligible jobs to ``worker_id``."""
        await self._record_worker(worker_id, runnable)
        definitions = list(runnable) if runnable is not None else None
        if queue in self._unlimited:
            return await self._claim_unlimited(queue, want, worker_id, definitions)
        queue_limit = self._queue_limits.get(queue, 0)
        spent = self._rates.spent_keys()
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                QUEUE_CANDIDATES,
                queue,
                list(runnable) if runnable is not None else None,
                want * CANDIDATE_SLACK,
                spent,
            )
            candidates = [self._candidate(row) for row in rows]
            chosen, held_by_rate = await self._admit(conn, candidates, want, queue, queue_limit)
            grants = await self._grant(conn, chosen, worker_id)
            retry_after = None
            if len(grants) < want:
                held_by_rate = held_by_rate or await self._rate_held(conn, queue, spent)
                retry_after = await self._token_retry(conn, queue, definitions, held_by_rate)
        return QueueClaim(grants, retry_after)

    async def _claim_unlimited(
        self, queue: str, want: int, worker_id: str, definitions: list[str] | None
    ) -> QueueClaim:
        """A queue no limit applies to: one statement scans and grants, as LockJobs did
        before the scheduler; the unused tokens' answer costs a second one."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                GRANT_UNLIMITED, queue, definitions, want, worker_id, self._lease_ttl_ms
            )
            grants = self._grants(rows)
            retry_after = None
            if len(grants) < want:
                retry_after = await self._token_retry(conn, queue, definitions, False)
        return QueueClaim(grants, retry_after)

    async def claim_jobs(
        self, job_ids: Sequence[str], worker_id: str
    ) -> list[LockGrant | LockRefusal]:
        """Grants the named jobs (distinct ids) that are eligible and within the limits;
        answers per id, in order. A refusal carries ``retry_after`` when the job is not
        due yet or only held back by a limit."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(NAMED_CANDIDATES, list(job_ids))
            granted: dict[str, LockGrant] = {}
            held: list[str] = []
            for queue in dict.fromkeys(row["queue"] for row in rows):
                candidates = [self._candidate(r) for r in rows if r["queue"] == queue]
                limit = self._queue_limits.get(queue, 0)
                chosen, _ = await self._admit(conn, candidates, len(candidates), queue, limit)
                for grant in await self._grant(conn, chosen, worker_id):
                    granted[grant.job_id] = grant
                held += [c.job_id for c in candidates if c.job_id not in granted]
            refused = [job_id for job_id in job_ids if job_id not in granted]
            not_due = (
                {r["id"]: r["next_run_at"] for r in await conn.fetch(NOT_DUE, refused)}
                if refused
                else {}
            )
        recheck = datetime.now(UTC) + timedelta(seconds=VERSION_RECHECK_S)
        not_due |= {job_id: recheck for job_id in held}
        return [granted.get(job_id) or LockRefusal(not_due.get(job_id)) for job_id in job_ids]

    def _candidate(self, row: asyncpg.Record) -> Candidate:
        tier = row["model_tier"]
        return Candidate(
            job_id=row["id"],
            concurrency_key=row["concurrency_key"],
            concurrency_limit=row["concurrency_limit"] or 0,
            rate_key=tier if tier and self._rates.limits(tier) else None,
        )

    async def _admit(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        candidates: list[Candidate],
        want: int,
        queue: str,
        queue_limit: int,
    ) -> tuple[list[tuple[Candidate, int]], bool]:
        """The candidates to grant with the tokens each reserves, and whether a rate
        limit held any back."""
        keys = keys_to_count(candidates, queue, queue_limit)
        running: dict[str, int] = {}
        if keys:
            await conn.execute(LOCK_KEYS, keys)
            queues = [queue] if queue_limit else []
            plain = [k for k in keys if k != queue_key(queue)]
            rows = await conn.fetch(RUNNING_BY_KEY, plain, queues)
            running = {r["key"]: r["running"] for r in rows}
        admitted = admit(candidates, want, running, queue, queue_limit)
        demand = rate_demand(admitted)
        if not demand:
            return [(c, 0) for c in admitted], False
        granted, tokens = {}, {}
        for key, n in demand.items():
            estimate = self._estimated_tokens.get(key, 0)
            granted[key], tokens[key] = await self._rates.reserve(conn, key, n, estimate)
        chosen = within_rate(admitted, granted)
        return (
            [(c, tokens[c.rate_key] if c.rate_key else 0) for c in chosen],
            len(chosen) < len(admitted),
        )

    async def _grant(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        chosen: list[tuple[Candidate, int]],
        worker_id: str,
    ) -> list[LockGrant]:
        if not chosen:
            return []
        rows = await conn.fetch(
            GRANT,
            [c.job_id for c, _ in chosen],
            worker_id,
            self._lease_ttl_ms,
            [tokens or None for _, tokens in chosen],
        )
        return self._grants(rows)

    def _grants(self, rows: list[asyncpg.Record]) -> list[LockGrant]:
        for row in rows:
            metrics.picked_up(row["job_type"], row["waited_s"] or 0.0)
        return [
            LockGrant(
                job_id=row["id"],
                job_type=row["job_type"],
                lease_token=row["lease_token"],
                attempt=row["attempt_count"],
                lease_expires_at=row["lock_until"],
                input=row["payload"],
                user_id=row["user_id"],
                prompt_key=row["prompt_key"] or "",
                prompt_version=row["prompt_version"] or "",
                credential_mode=CredentialMode(row["credential_mode"]),
                credential_id=row["credential_id"],
                has_steps=row["has_steps"],
            )
            for row in rows
        ]

    async def _rate_held(
        self, conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], queue: str, spent: list[str]
    ) -> bool:
        """Do due jobs of a tier whose budget is spent wait in the queue (the scan passed
        them over)?"""
        return bool(spent) and bool(await conn.fetchval(RATE_HELD_WAIT, queue, spent))

    async def _token_retry(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        queue: str,
        runnable: Sequence[str] | None,
        held_by_rate: bool,
    ) -> datetime | None:
        """When an unused token should come back, or None to drop it. Back once the rate
        limit that held jobs back has budget again; shortly when grantable jobs still wait
        (rows a concurrent claim had locked: it may not grant them); after a second when
        due jobs wait for a worker of another version. Jobs held by a full concurrency key
        get a new token when a job of the key ends, a paused queue's when it resumes: with
        only those left, the token is dropped."""
        now = datetime.now(UTC)
        if held_by_rate:
            return now + timedelta(seconds=self._rates.seconds_until_budget())
        left = await conn.fetchrow(WAITING_LEFT, queue, runnable)
        assert left is not None
        if left["mine"]:
            return now + timedelta(seconds=CONTENDED_RECHECK_S)
        if left["others"]:
            return now + timedelta(seconds=VERSION_RECHECK_S)
        return None

    async def _record_worker(self, worker_id: str, runnable: Sequence[str] | None) -> None:
        """Remembers what the worker runs (for holds and the no-worker-for-version gauge),
        at most every few seconds per worker."""
        if runnable is None:
            return
        key = (worker_id, tuple(runnable))
        now = datetime.now(UTC).timestamp()
        if now - self._workers_seen.get(key, 0.0) < WORKER_RECORD_INTERVAL_S:
            return
        self._workers_seen[key] = now
        await self._pool.execute(RECORD_WORKER, worker_id, list(runnable))


# Scheduling settings reach every statement through session settings the pool sets
# (JOBS_SCHED_*; create_pool), with the defaults when a pool was made without them.
def _setting(name: str, default: float) -> str:
    return f"coalesce(nullif(current_setting('jobs.{name}', true), '')::float8, {default})"


PRIORITY_STEP = _setting("priority_step_s", DEFAULT_PRIORITY_STEP_S)
FAIR_QUANTUM = _setting("fair_quantum_s", DEFAULT_FAIR_QUANTUM_S)
# Queues with a concurrency limit: their jobs' ends re-issue a token, as keyed jobs' do.
LIMITED_QUEUES = "string_to_array(nullif(current_setting('jobs.limited_queues', true), ''), ',')"


def place_in_line(src: str) -> str:
    """The SQL of a new waiting job's ``sched_key`` from ``src`` (with queue, priority,
    fairness_key, next_run_at): its due time moved ahead by its priority, and never ahead
    of one quantum after the last due job of its fairness key at its priority."""
    return f"""greatest(
        extract(epoch FROM coalesce({src}.next_run_at, now()))::float8
            - {src}.priority * {PRIORITY_STEP},
        (SELECT max(w.sched_key) FROM jobs w
         WHERE w.queue = {src}.queue AND w.fairness_key = {src}.fairness_key
           AND w.priority = {src}.priority AND w.status IN {WAITING}
           AND (w.next_run_at IS NULL OR w.next_run_at <= now())) + {FAIR_QUANTUM})"""


def retry_place(next_run_at: str, priority: str) -> str:
    """A retry's place in line: its due time moved ahead by its priority (it has had its
    fair turn)."""
    return f"extract(epoch FROM {next_run_at})::float8 - {priority} * {PRIORITY_STEP}"


def released_slot_tokens(ended: str, *, owner: str | None = None) -> str:
    """Inserts a work token for each attempt of ``ended`` (id, queue, concurrency_key,
    lease_token) that frees a limited slot (a concurrency key or a limited queue): the
    jobs it held back get their turn, since their own tokens were dropped. ``owner`` as
    for ``dispatch_rows``."""
    return dispatch_rows(
        f"(SELECT * FROM {ended} WHERE concurrency_key IS NOT NULL"
        f" OR queue = ANY({LIMITED_QUEUES}))",
        dispatch_key("src.id", "release", "src.lease_token::text"),
        trace="NULL::jsonb",
        owner=owner,
    )
