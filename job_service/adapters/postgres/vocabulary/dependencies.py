"""Attaching a job to the jobs it depends on, as the statements that create jobs do it
(CreateJob, a result's join, an operator's re-run): the edges and the count of edges the
resolver has yet to count. The resolver and the reads are ``dependencies.py``'s; the
trigger that marks an ending dependency's edges is migration 0021's.

Attaching locks the dependencies' rows FOR SHARE NOWAIT: a dependency is either ended
(committed) when it is attached, and counted as ended then, or ends after the attach has
committed, when the trigger sees the edge. NOWAIT makes an attach never wait for (so never
deadlock with) a statement ending a dependency: a busy row fails the attach, whose
transaction is run again (``attach_retrying``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import asyncpg

from job_service.adapters.postgres.vocabulary.statuses import sql_status, statuses_sql
from job_service.domain.lifecycle import TERMINAL, JobStatus
from shared.registry import DependencyPolicy

_TERMINAL = statuses_sql(TERMINAL)
_CREATED = sql_status(JobStatus.CREATED)

# Which of $1 (job ids) are jobs of user $2.
# (Each id looked up by the primary key: a generic plan of ``id = ANY($1)`` may scan the
# user's jobs and compare each with every id, quadratic for a wide join.)
OWNED = """
SELECT d.id::text AS id FROM unnest($1::text[]::uuid[]) AS x(id) JOIN jobs d ON d.id = x.id
WHERE d.user_id = $2
"""

# Attaches job $1's dependencies $2 (jobs of user $4) with policy $3, in the transaction
# that created it: locks them (FOR SHARE NOWAIT: a dependency ending now fails the
# statement) and writes an edge per dependency, already ended for those that have; every
# edge is left for the resolver to count (the ended ones at its next round), so that one
# path decides when the job runs. Answers how many were attached and how many not ended.
ATTACH = f"""
WITH deps AS (
    SELECT d.id, d.status FROM unnest($2::text[]::uuid[]) AS x(id) JOIN jobs d ON d.id = x.id
    WHERE d.user_id = $4
    ORDER BY d.id FOR SHARE OF d NOWAIT
), edges AS (
    INSERT INTO job_dependencies (job_id, depends_on_id, ended_status, ended_at)
    SELECT $1::uuid, d.id, CASE WHEN d.status IN {_TERMINAL} THEN d.status END,
           CASE WHEN d.status IN {_TERMINAL} THEN now() END
    FROM deps d
    RETURNING ended_status
), facts AS (
    SELECT count(*) AS attached, count(*) FILTER (WHERE ended_status IS NULL) AS pending
    FROM edges
), counted AS (
    UPDATE jobs j SET dependency_policy = $3::text, dependencies_uncounted = facts.attached
    FROM facts WHERE j.id = $1::uuid
)
SELECT attached, pending FROM facts
"""

# A join's siblings: the jobs of user $1 with job types $2 and idempotency keys $3, pair
# by pair (a sibling whose key named an existing job is that job).
SIBLINGS = """
SELECT j.id::text AS id FROM unnest($2::text[], $3::text[]) AS s(job_type, idempotency_key)
JOIN jobs j ON j.user_id = $1 AND j.job_type = s.job_type
           AND j.idempotency_key = s.idempotency_key
"""

# An operator re-ran job $1 as job $2: each job still waiting for $1 waits for $2 too (an
# edge, ended already if the re-run has, and one more to count). The re-run's row is
# locked as an attach locks a dependency's; the waiting jobs in id order, as the resolver
# locks them.
MOVE_WAITING = f"""
WITH rerun AS (
    SELECT id, status FROM jobs WHERE id = $2::uuid FOR SHARE NOWAIT
), waiting AS (
    SELECT e.job_id FROM job_dependencies e JOIN jobs j ON j.id = e.job_id
    WHERE e.depends_on_id = $1::uuid AND j.status = {_CREATED}
    ORDER BY e.job_id FOR UPDATE OF j
), edges AS (
    INSERT INTO job_dependencies (job_id, depends_on_id, ended_status, ended_at)
    SELECT w.job_id, rerun.id, CASE WHEN rerun.status IN {_TERMINAL} THEN rerun.status END,
           CASE WHEN rerun.status IN {_TERMINAL} THEN now() END
    FROM waiting w, rerun
    ON CONFLICT DO NOTHING
    RETURNING job_id
), counted AS (
    UPDATE jobs j SET dependencies_uncounted = j.dependencies_uncounted + 1
    FROM edges WHERE j.id = edges.job_id
)
SELECT count(*) FROM edges
"""

# For the rest of the attaching transaction.
CUSTOM_PLANS = "SET LOCAL plan_cache_mode = force_custom_plan"
# How often a new job's attach is tried while a dependency's row is busy being ended.
ATTACH_TRIES = 50
ATTACH_BACKOFF_S = 0.02

T = TypeVar("T")


async def attach_retrying(
    pool: asyncpg.Pool,
    work: Callable[[asyncpg.pool.PoolConnectionProxy[asyncpg.Record]], Awaitable[T]],
) -> T:
    """Runs ``work`` in a transaction of its own, again (from the start) while an attach in
    it finds a dependency's row locked by the statement ending it: that statement commits
    in milliseconds, and the next try then counts the dependency as ended."""
    for attempt in range(ATTACH_TRIES):
        try:
            async with pool.acquire() as conn, conn.transaction():
                return await work(conn)
        except asyncpg.LockNotAvailableError:
            if attempt == ATTACH_TRIES - 1:
                raise
            await asyncio.sleep(ATTACH_BACKOFF_S * (1 + attempt % 5))
    raise AssertionError("unreachable")


async def attach(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    job_id: str,
    depends_on: Sequence[str],
    policy: DependencyPolicy,
    user_id: str,
) -> tuple[int, int]:
    """Attaches ``job_id``'s dependencies (in the caller's transaction): how many were
    found (the user's jobs among ``depends_on``), and how many of them have not ended."""
    # Planned for these dependencies, not from a cached generic plan: a plan made while
    # `jobs` was small (the hot pool forces generic plans) joined a wide join's ids and
    # checked each edge's foreign key by scanning `jobs` — 12 s for 10,000 against 0.5 s.
    await conn.execute(CUSTOM_PLANS)
    row = await conn.fetchrow(ATTACH, job_id, list(depends_on), policy.value, user_id)
    assert row is not None
    return int(row["attached"]), int(row["pending"])
