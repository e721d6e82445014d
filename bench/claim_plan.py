"""What the scheduling policy costs per claim: PostgreSQL alone, no services.

    python -m bench.claim_plan                       # defaults below
    python -m bench.claim_plan --waiting 20000 --claims 100 --held 2000

It starts a private PostgreSQL the way ``make bench`` does (durable defaults), migrates it
to head and loads WAITING waiting jobs in one statement with a realistic spread: USERS
users with a skewed share each (a few heavy users, many light ones), priorities 0/1/5,
one job in ten under one of 20 concurrency keys (limit 4, two of them running), 2 % delayed
an hour and 1 % retrying, plus finished history and a snapshot row per job (the grant
joins job_snapshots). Places in line are what CreateJob's ``place_in_line`` gives such a
stream: due time minus priority x step, a fairness key's jobs one quantum apart.

Then, on that table, it prints:

1. EXPLAIN (ANALYZE, BUFFERS) of the claim's candidate scan (``QUEUE_CANDIDATES``), the
   plan PostgreSQL picks for the literal values and the generic plan a prepared statement
   may switch to after five executions;
2. the time per claim of ``want`` tokens: the candidate scan alone and the whole
   ``Claims.claim_queue`` (scan, advisory locks and counts of the keys, grant),
   each in a transaction rolled back afterwards, so every claim sees the same line; the
   pre-scheduler ``LOCK_JOBS`` (25b579d: the ids a NATS message named) on the same jobs,
   alternating with the new path; the claim statement by statement; and (suggestion) a
   variant of the scan that finds the full keys once instead of counting per row;
3. CreateJob's ``place_in_line`` lookup (the fair-share ``max(sched_key)``): its plan for
   the heaviest user, its time for a heavy and a new user, and for a user with DELAYED
   jobs scheduled for tomorrow (the lookup walks back over them to the last due one);
4. claims that commit (the line moves, WAL is flushed);
5. the same as 2. (with the variant) with a held-back backlog: HELD jobs of one
   concurrency key that is full, placed at the front of the line, which every scan must
   walk past;
6. two claims at once on a short line, one token per job: what becomes of the tokens of
   a claim that finds only the other claim's locked spare candidates.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import asyncpg
import uvloop

from devstack.embedded import EmbeddedPostgres, ensure_database
from job_service.adapters.postgres.claims import (
    _LEASED,
    GRANT,
    KEY_ROOM,
    LOCK_KEYS,
    QUEUE_CANDIDATES,
    RUNNING_BY_KEY,
    ClaimRepository,
)
from job_service.adapters.postgres.migrations import upgrade
from job_service.adapters.postgres.pool import create_pool
from job_service.adapters.postgres.rate_limits import RateLimitRepository
from job_service.adapters.postgres.vocabulary.line import place_in_line
from job_service.domain.claims import (
    CANDIDATE_SLACK,
    DEFAULT_FAIR_QUANTUM_S,
    DEFAULT_PRIORITY_STEP_S,
    ClaimCandidate,
    admit,
    keys_to_count,
)
from job_service.domain.rate_limits import TierBudgets
from job_service.usecases.claims import Claims
from shared.constants import Queue
from shared.registry import Registry

QUEUE = Queue.INTERACTIVE.value
KEYS = 20  # concurrency keys of the keyed jobs
KEY_LIMIT = 4
HELD_KEY = "bench-held"

# The pre-scheduler claim (25b579d, job_service/adapters/postgres/leases.py): the ids the
# NATS messages named, locked in id order and granted in one statement.
OLD_LOCK_JOBS = """
WITH prior AS (
    SELECT id, status, coalesce(next_run_at, queued_at) AS due_at FROM jobs
    WHERE id = ANY($1::text[]::uuid[]) AND status = ANY($4::text[])
      AND (status = 'queued' OR next_run_at <= now())
    ORDER BY id
    FOR UPDATE
), locked AS (
    UPDATE jobs j SET status = 'running', locked_by = $2, locked_at = now(),
        lock_until = now() + $3 * interval '1 millisecond', lease_token = gen_random_uuid(),
        attempt_count = j.attempt_count + 1, started_at = coalesce(j.started_at, now()),
        next_run_at = NULL, progress = 0, updated_at = now()
    FROM prior WHERE j.id = prior.id
    RETURNING j.id, j.job_type, j.user_id, j.lease_token::text AS lease_token,
              j.attempt_count, j.lock_until, j.prompt_key, j.prompt_version,
              prior.status AS from_status, j.credential_mode,
              j.credential_id::text AS credential_id,
              extract(epoch FROM now() - prior.due_at)::float8 AS waited_s
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, worker_id)
    SELECT id, from_status, 'running', attempt_count, $2 FROM locked
)
SELECT l.id::text AS id, l.job_type, l.user_id, l.lease_token, l.attempt_count, l.lock_until,
       l.prompt_key, l.prompt_version, s.payload, l.credential_mode, l.credential_id, l.waited_s
FROM locked l JOIN job_snapshots s ON s.job_id = l.id
"""
OLD_LOCKABLE = ["created", "queued", "retrying"]

# $1 jobs, $2 users, $3 seconds of arrivals, $4 queue, $5 first index (ids stay distinct).
# A job's place: its due time minus priority x step, and never ahead of one quantum after
# the previous job of its user at its priority (what place_in_line gives, job by job).
LOAD_WAITING = f"""
WITH src AS (
    SELECT i, random() AS r_user, random() AS r_prio, random() AS r_key, random() AS r_kind,
           now() - ($1 - i) * ($3::float8 / $1) * interval '1 second' AS created_at
    FROM generate_series($5::int, $5::int + $1 - 1) i
), shaped AS (
    SELECT i, created_at,
           'bench-user-' || floor(power(r_user, 3) * $2)::int AS user_id,
           CASE WHEN r_prio < 0.80 THEN 0 WHEN r_prio < 0.95 THEN 1 ELSE 5 END AS priority,
           CASE WHEN r_key < 0.10 THEN 'bench-key-' || (i % {KEYS}) END AS concurrency_key,
           CASE WHEN r_kind < 0.02 THEN 'created' WHEN r_kind < 0.03 THEN 'retrying'
                ELSE 'queued' END AS status,
           CASE WHEN r_kind < 0.02 THEN now() + r_kind * 50 * interval '1 hour'
                WHEN r_kind < 0.03 THEN created_at + interval '5 seconds' END AS next_run_at,
           CASE WHEN r_kind > 0.7 THEN 'small' END AS model_tier
    FROM src
), placed AS (
    SELECT *, greatest(
        extract(epoch FROM coalesce(next_run_at, created_at))
            - priority * {DEFAULT_PRIORITY_STEP_S},
        extract(epoch FROM first_value(created_at) OVER w)
            + (row_number() OVER w - 1) * {DEFAULT_FAIR_QUANTUM_S}) AS sched_key
    FROM shaped
    WINDOW w AS (PARTITION BY user_id, priority ORDER BY i)
)
INSERT INTO jobs (user_id, job_type, queue, priority, request_hash, status, max_attempts,
                  timeout_ms, input_schema_version, output_schema_version, definition_version,
                  model_tier, fairness_key, concurrency_key, concurrency_limit, next_run_at,
                  queued_at, created_at, updated_at, attempt_count, sched_key)
SELECT user_id, 'synthetic', $4, priority, md5(i::text), status, 3, 60000, '1', '1', '1',
       model_tier, user_id, concurrency_key,
       CASE WHEN concurrency_key IS NOT NULL THEN {KEY_LIMIT} END, next_run_at,
       created_at, created_at, created_at, CASE WHEN status = 'retrying' THEN 1 ELSE 0 END,
       sched_key
FROM placed
"""

# $1 jobs, $2 status, $3 queue, $4 concurrency key or NULL, $5 its limit: finished history
# and running jobs (running ones hold a lease).
LOAD_OTHER = """
INSERT INTO jobs (user_id, job_type, queue, priority, request_hash, status, max_attempts,
                  timeout_ms, input_schema_version, output_schema_version, definition_version,
                  fairness_key, concurrency_key, concurrency_limit, queued_at, created_at,
                  started_at, finished_at, locked_by, lock_until, lease_token, attempt_count)
SELECT 'bench-user-' || (i % 50), 'synthetic', $3, 0, md5(i::text), $2::varchar, 3, 60000,
       '1', '1', '1', 'bench-user-' || (i % 50), $4::varchar, $5::int,
       now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour',
       CASE WHEN $2::varchar = 'succeeded' THEN now() - interval '59 minutes' END,
       CASE WHEN $2::varchar = 'running' THEN 'bench-worker' END,
       CASE WHEN $2::varchar = 'running' THEN now() + interval '1 hour' END,
       CASE WHEN $2::varchar = 'running' THEN gen_random_uuid() END, 1
FROM generate_series(1, $1) i
"""

SNAPSHOTS = """
INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version)
SELECT j.id, jsonb_build_object('prompt', 'summarise document ' || j.request_hash),
       j.request_hash, '1'
FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM job_snapshots s WHERE s.job_id = j.id)
"""

# The held-back backlog: ``sched_key`` below every other job's, so a scan meets it first.
MOVE_HELD_TO_FRONT = f"""
UPDATE jobs SET concurrency_key = '{HELD_KEY}', concurrency_limit = 2,
    sched_key = (SELECT min(sched_key) FROM jobs) - 100 + h.rn * 0.01
FROM (SELECT id AS held_id, row_number() OVER (ORDER BY id) AS rn FROM jobs
      WHERE queue = $1 AND concurrency_key IS NULL AND status = 'queued' LIMIT $2) h
WHERE id = h.held_id
"""

# CreateJob's fair-share lookup for a user: ``place_in_line`` on a one-row source.
PLACE_IN_LINE = f"""
SELECT {place_in_line("new")} FROM (
    SELECT $1::varchar AS queue, $2::varchar AS fairness_key, $3::smallint AS priority,
           NULL::timestamptz AS next_run_at) new
"""

# A user with a due job and, behind it in line, DELAYED jobs scheduled for tomorrow (their
# places are past every due job's): the fair-share lookup walks back over all of them.
DELAYED_USER = "bench-delayed-user"
MAKE_DELAYED_USER = f"""
UPDATE jobs SET user_id = '{DELAYED_USER}', fairness_key = '{DELAYED_USER}',
    status = CASE WHEN h.rn = 1 THEN 'queued' ELSE 'created' END,
    next_run_at = CASE WHEN h.rn > 1 THEN now() + interval '1 day' END,
    sched_key = CASE WHEN h.rn = 1 THEN extract(epoch FROM now())
                     ELSE extract(epoch FROM now() + interval '1 day') + h.rn END
FROM (SELECT id AS delayed_id, row_number() OVER (ORDER BY id) AS rn FROM jobs
      WHERE queue = $1 AND priority = 0 AND status = 'queued' AND concurrency_key IS NULL
      LIMIT $2) h
WHERE id = h.delayed_id
"""

FRONT_IDS = f"""
SELECT id::text FROM jobs WHERE queue = $1 AND status IN ('created', 'queued', 'retrying')
  AND (next_run_at IS NULL OR next_run_at <= now())
  AND (concurrency_key IS NULL OR concurrency_key <> '{HELD_KEY}')
ORDER BY sched_key LIMIT $2
"""


# A suggestion, not the service's SQL: the keys that are full, found once per scan (an
# uncorrelated subquery: an InitPlan) instead of a count per row the scan walks past. It
# compares a key's running count with the limit its running jobs carry, where the current
# text uses the waiting job's own limit (the same when a key has one limit); either way a
# hint, which the count under the key's advisory lock decides. Empty when claims.py no
# longer has the text it replaces.
FULL_KEYS_ROOM = f"""(j.concurrency_key IS NULL OR j.concurrency_key <> ALL (ARRAY(
    SELECT r.concurrency_key FROM jobs r
    WHERE r.status IN {_LEASED} AND r.concurrency_key IS NOT NULL
    GROUP BY r.concurrency_key HAVING count(*) >= max(r.concurrency_limit))))"""
ONCE_CANDIDATES = (
    QUEUE_CANDIDATES.replace(KEY_ROOM, FULL_KEYS_ROOM) if KEY_ROOM in QUEUE_CANDIDATES else ""
)


class RollbackPool:
    """A pool of one connection for ClaimRepository, inside a transaction the caller rolls
    back (the repository's own transaction becomes a savepoint)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        yield self._conn


def repository(pool: Any) -> Claims:
    """The claims use case on ``pool``, with no limits configured and no job types: every
    claim takes the whole path (admission and all), not the one-statement fast path."""
    budgets = TierBudgets({}, 30.0)
    return Claims(
        Registry(),
        ClaimRepository(pool, lease_ttl_s=60.0),
        RateLimitRepository(pool, budgets),
        budgets,
        queue_limits={},
    )


def ms_summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = statistics.quantiles(ordered, n=100)[98] if len(ordered) >= 2 else ordered[0]
    return f"median {statistics.median(ordered):7.2f} ms   p99 {p99:7.2f} ms   (n={len(ordered)})"


async def rolled_back(conn: asyncpg.Connection, work: Callable[[], Awaitable[Any]]) -> float:
    """ms of ``work`` in a transaction then rolled back (BEGIN and ROLLBACK not counted)."""
    tx = conn.transaction()
    await tx.start()
    try:
        started = time.perf_counter()
        await work()
        return (time.perf_counter() - started) * 1000
    finally:
        await tx.rollback()


async def explain(conn: asyncpg.Connection, sql: str, *args: Any) -> str:
    tx = conn.transaction()
    await tx.start()
    try:
        rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *args)
        return "\n".join(f"    {r[0]}" for r in rows)
    finally:
        await tx.rollback()


async def generic_plan(conn: asyncpg.Connection, want: int) -> str:
    """The candidate scan's plan as a prepared statement's generic plan."""
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        await conn.execute(
            f"PREPARE bench_candidates(text, text[], int, text[]) AS {QUEUE_CANDIDATES}"
        )
        rows = await conn.fetch(
            f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_candidates('{QUEUE}', NULL, {want}, '{{}}')"
        )
        return "\n".join(f"    {r[0]}" for r in rows)
    finally:
        await tx.rollback()
        await conn.execute("DEALLOCATE bench_candidates")


async def load(conn: asyncpg.Connection, args: argparse.Namespace) -> None:
    started = time.perf_counter()
    await conn.execute("SET synchronous_commit = off")
    await conn.execute(LOAD_WAITING, args.waiting, args.users, 600.0, QUEUE, 1)
    await conn.execute(LOAD_OTHER, args.finished, "succeeded", QUEUE, None, None)
    await conn.execute(LOAD_OTHER, 64, "running", QUEUE, None, None)
    for key in range(KEYS):
        await conn.execute(LOAD_OTHER, 2, "running", QUEUE, f"bench-key-{key}", KEY_LIMIT)
    await conn.execute(SNAPSHOTS)
    await conn.execute("VACUUM ANALYZE jobs")
    await conn.execute("VACUUM ANALYZE job_snapshots")
    await conn.execute("SET synchronous_commit = on")
    counts = await conn.fetch(
        "SELECT status, count(*) AS n, count(concurrency_key) AS keyed FROM jobs"
        " GROUP BY status ORDER BY status"
    )
    heavy = await conn.fetchrow(
        "SELECT fairness_key, count(*) AS n FROM jobs WHERE status = 'queued'"
        " GROUP BY fairness_key ORDER BY n DESC LIMIT 1"
    )
    print(f"loaded in {time.perf_counter() - started:.1f} s:", end=" ")
    print(", ".join(f"{r['status']} {r['n']:,} ({r['keyed']:,} keyed)" for r in counts))
    assert heavy is not None
    print(f"heaviest user {heavy['fairness_key']}: {heavy['n']:,} queued jobs")


async def time_claims(
    conn: asyncpg.Connection, args: argparse.Namespace, label: str, *, old: bool
) -> None:
    """Rolled-back claims: the candidate scan alone, the whole claim_queue, and (``old``)
    the pre-scheduler LOCK_JOBS on the jobs the claim grants, alternating."""
    claims = repository(RollbackPool(conn))
    front = [r[0] for r in await conn.fetch(FRONT_IDS, QUEUE, args.want)]
    scan: list[float] = []
    whole: list[float] = []
    before: list[float] = []
    granted = 0

    async def claim() -> None:
        nonlocal granted
        result = await claims.claim_queue(QUEUE, args.want, "bench-worker", None)
        granted = len(result.grants)

    for _ in range(args.claims):
        scan.append(
            await rolled_back(
                conn,
                lambda: conn.fetch(QUEUE_CANDIDATES, QUEUE, None, args.want * CANDIDATE_SLACK, []),
            )
        )
        whole.append(await rolled_back(conn, claim))
        if old:
            before.append(
                await rolled_back(
                    conn,
                    lambda: conn.fetch(OLD_LOCK_JOBS, front, "bench-worker", 60000.0, OLD_LOCKABLE),
                )
            )
    print(f"\n{label}: {args.claims} claims of {args.want} tokens each, rolled back")
    print(f"  candidate scan (LIMIT {args.want * CANDIDATE_SLACK})   {ms_summary(scan)}")
    print(f"  whole claim_queue ({granted} granted) {ms_summary(whole)}")
    if old:
        print(f"  pre-scheduler LOCK_JOBS by id  {ms_summary(before)}")
        ratios = sorted(w / b for w, b in zip(whole, before, strict=True))
        print(f"  claim_queue / LOCK_JOBS, median of pairs: {statistics.median(ratios):.2f}")
    await statements(conn, args)


async def statements(conn: asyncpg.Connection, args: argparse.Namespace) -> None:
    """claim_queue's statements one by one (as it runs them, no rate limits configured),
    each timed, in transactions rolled back."""
    times: dict[str, list[float]] = {"candidates": [], "lock keys": [], "count keys": []}
    times["grant"] = []
    limit = args.want * CANDIDATE_SLACK
    for _ in range(args.claims):
        tx = conn.transaction()
        await tx.start()
        try:
            mark = time.perf_counter()

            def lap(name: str) -> None:
                nonlocal mark
                now = time.perf_counter()
                times[name].append((now - mark) * 1000)
                mark = now

            rows = await conn.fetch(QUEUE_CANDIDATES, QUEUE, None, limit, [])
            lap("candidates")
            candidates = [
                ClaimCandidate(r["id"], r["concurrency_key"], r["concurrency_limit"] or 0)
                for r in rows
            ]
            keys = keys_to_count(candidates, QUEUE, 0)
            running: dict[str, int] = {}
            if keys:
                await conn.execute(LOCK_KEYS, keys)
                lap("lock keys")
                counted = await conn.fetch(RUNNING_BY_KEY, keys, [])
                running = {r["key"]: r["running"] for r in counted}
                lap("count keys")
            chosen = admit(candidates, args.want, running, QUEUE, 0)
            mark = time.perf_counter()
            await conn.fetch(
                GRANT, [c.job_id for c in chosen], "bench-worker", 60000.0, [None] * len(chosen)
            )
            lap("grant")
        finally:
            await tx.rollback()
    print("  statement by statement (one round trip each):")
    for name, samples in times.items():
        if samples:
            print(f"    {name:<28} {ms_summary(samples)}")


async def once_scan(conn: asyncpg.Connection, args: argparse.Namespace) -> None:
    """The suggested scan (full keys found once): its plan and time, alternating with the
    current one, and a check that both choose the same candidates."""
    if not ONCE_CANDIDATES:
        print("\n(the full-keys variant no longer applies to claims.py's text: skipped)")
        return
    limit = args.want * CANDIDATE_SLACK
    print("\n  suggestion (not the service's SQL): the full keys found once per scan:")
    print(await explain(conn, ONCE_CANDIDATES, QUEUE, None, limit, []))
    now: list[float] = []
    once: list[float] = []
    for _ in range(args.claims):
        now.append(
            await rolled_back(conn, lambda: conn.fetch(QUEUE_CANDIDATES, QUEUE, None, limit, []))
        )
        once.append(
            await rolled_back(conn, lambda: conn.fetch(ONCE_CANDIDATES, QUEUE, None, limit, []))
        )
    await rolled_back(conn, lambda: same_rows(conn, limit))
    print(f"    current candidate scan     {ms_summary(now)}")
    print(f"    full keys once per scan    {ms_summary(once)}")
    print("    (both chose the same candidates in the same order)")


async def same_rows(conn: asyncpg.Connection, limit: int) -> None:
    a = [r["id"] for r in await conn.fetch(QUEUE_CANDIDATES, QUEUE, None, limit, [])]
    b = [r["id"] for r in await conn.fetch(ONCE_CANDIDATES, QUEUE, None, limit, [])]
    if a != b:
        raise AssertionError("the full-keys scan chose other candidates")


async def spare_race(pool: asyncpg.Pool, conn: asyncpg.Connection, want: int) -> None:
    """Two claims at once on a short line, with exactly one token per waiting job: the
    first claim's spare candidates (locked by its scan, not granted) are skipped by the
    second, which answers its tokens unused and without retry_after (they are dropped);
    once the first commits, the spares wait with no token."""
    extra = max(1, want // 4)
    await conn.execute(
        "UPDATE jobs SET status = 'succeeded' WHERE status IN ('queued', 'created', 'retrying')"
    )
    await conn.execute(LOAD_WAITING, want + extra, 10, 1.0, QUEUE, 10_000_000)
    await conn.execute(
        "UPDATE jobs SET next_run_at = NULL, status = 'queued', concurrency_key = NULL"
        " WHERE status IN ('created', 'queued', 'retrying')"
    )
    await conn.execute(SNAPSHOTS)
    first = repository(RollbackPool(conn))
    second = repository(pool)
    # The first claim's candidate scan, its transaction open (as while its grant runs) ...
    tx = conn.transaction()
    await tx.start()
    locked = await conn.fetch(QUEUE_CANDIDATES, QUEUE, None, want * CANDIDATE_SLACK, [])
    # ... meanwhile the second claim, for the other tokens ...
    result = await second.claim_queue(QUEUE, extra, "bench-worker-2", None)
    await tx.rollback()
    # ... then the first claim itself, which commits.
    tx = conn.transaction()
    await tx.start()
    granted = await first.claim_queue(QUEUE, want, "bench-worker-1", None)
    await tx.commit()
    left = await conn.fetchval(
        "SELECT count(*) FROM jobs WHERE status = 'queued' AND queue = $1", QUEUE
    )
    print(f"\nTwo claims at once, {want} + {extra} tokens for {want + extra} waiting jobs")
    print(f"  (CANDIDATE_SLACK={CANDIDATE_SLACK}): the first claim's scan locks {len(locked)};")
    print(f"  the second grants {len(result.grants)} of {extra}, retry_after={result.retry_after}")
    fate = "dropped" if result.retry_after is None else "handed back"
    print(f"  (unused tokens {fate}); the first grants {len(granted.grants)} and commits:")
    print(f"  {left} jobs left waiting", end=" ")
    if result.retry_after is None:
        print("with no token (until the dispatch reconciler re-sends")
        print("  them: JOBS_RECONCILE_AFTER_S, 30 s by default)")
    else:
        print("for the tokens handed back")


async def committed_claims(pool: asyncpg.Pool, args: argparse.Namespace) -> None:
    """Claims that commit (the service's cost: a transaction, its WAL flush)."""
    claims = repository(pool)
    samples = []
    granted = 0
    for _ in range(args.claims):
        started = time.perf_counter()
        result = await claims.claim_queue(QUEUE, args.want, "bench-worker", None)
        samples.append((time.perf_counter() - started) * 1000)
        granted += len(result.grants)
    print(f"\ncommitted: {args.claims} claim_queue of {args.want} tokens ({granted:,} granted)")
    print(f"  whole claim_queue with commit {ms_summary(samples)}")


async def place_lookup(conn: asyncpg.Connection, args: argparse.Namespace) -> None:
    heavy = await conn.fetchval(
        "SELECT fairness_key FROM jobs WHERE status = 'queued'"
        " GROUP BY fairness_key ORDER BY count(*) DESC LIMIT 1"
    )
    waiting = await conn.fetchval(
        "SELECT count(*) FROM jobs WHERE fairness_key = $1 AND priority = 0"
        " AND status IN ('created', 'queued', 'retrying')",
        heavy,
    )
    print(f"\nCreateJob's place_in_line for {heavy} ({waiting:,} waiting at priority 0):")
    print(await explain(conn, PLACE_IN_LINE, QUEUE, heavy, 0))
    for who in (str(heavy), "bench-new-user"):

        async def lookup(who: str = who) -> None:
            await conn.fetchval(PLACE_IN_LINE, QUEUE, who, 0)

        samples = [await rolled_back(conn, lookup) for _ in range(args.claims)]
        print(f"  place_in_line, {who:<20} {ms_summary(samples)}")
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.execute(MAKE_DELAYED_USER, QUEUE, args.delayed + 1)
        print(f"\n  a user with 1 due job and {args.delayed:,} delayed to tomorrow (rolled back):")
        plan = await explain(conn, PLACE_IN_LINE, QUEUE, DELAYED_USER, 0)
        print("\n".join(line for line in plan.splitlines() if "Removed" in line or "Exec" in line))

        async def delayed() -> None:
            await conn.fetchval(PLACE_IN_LINE, QUEUE, DELAYED_USER, 0)

        samples = []
        for _ in range(args.claims):
            started = time.perf_counter()
            await delayed()
            samples.append((time.perf_counter() - started) * 1000)
        print(f"  place_in_line, {DELAYED_USER:<20} {ms_summary(samples)}")
    finally:
        await tx.rollback()


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-claim-plan-"))
    pg = EmbeddedPostgres(root / "pg")
    try:
        pg.start()
        await ensure_database(pg.url("postgres"), "jobs")
        url = pg.url("jobs")
        await asyncio.to_thread(upgrade, url)
        pool = await create_pool(url, 2)
        async with pool.acquire() as proxy:
            conn = cast(asyncpg.Connection, proxy)
            await load(conn, args)
            limit = args.want * CANDIDATE_SLACK
            print(f"\nCandidate scan at {args.waiting:,} waiting, LIMIT {limit}:")
            print(
                await explain(conn, QUEUE_CANDIDATES, QUEUE, None, args.want * CANDIDATE_SLACK, [])
            )
            print("\n  as a generic plan (prepared statement after five executions):")
            print(await generic_plan(conn, args.want * CANDIDATE_SLACK))
            await time_claims(conn, args, "front of the line free", old=True)
            await once_scan(conn, args)
            await place_lookup(conn, args)
        await committed_claims(pool, args)
        async with pool.acquire() as proxy:
            conn = cast(asyncpg.Connection, proxy)
            await conn.execute(MOVE_HELD_TO_FRONT, QUEUE, args.held)
            await conn.execute(LOAD_OTHER, 2, "running", QUEUE, HELD_KEY, 2)
            await conn.execute("ANALYZE jobs")
            print(f"\nHeld back: {args.held:,} jobs of key {HELD_KEY} (limit 2, 2 running)")
            print(" at the front of the line; the candidate scan:")
            print(
                await explain(conn, QUEUE_CANDIDATES, QUEUE, None, args.want * CANDIDATE_SLACK, [])
            )
            await time_claims(conn, args, "held-back backlog at the front", old=False)
            await once_scan(conn, args)
            await spare_race(pool, conn, args.want)
        await pool.close()
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", type=int, default=100_000, help="waiting jobs loaded")
    parser.add_argument("--finished", type=int, default=50_000, help="finished jobs loaded")
    parser.add_argument("--users", type=int, default=200, help="users (fairness keys)")
    parser.add_argument("--claims", type=int, default=200, help="claims timed per case")
    parser.add_argument("--want", type=int, default=32, help="tokens per claim")
    parser.add_argument("--held", type=int, default=5_000, help="held-back jobs of one key")
    parser.add_argument("--delayed", type=int, default=5_000, help="delayed jobs of one user")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
