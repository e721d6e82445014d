"""Queues on PostgreSQL: pause and resume, their counts, and the facts that explain why
one waiting job is held back.

Resuming a queue gives each of its waiting jobs a new dispatch row (a work token): the
tokens of a paused queue are dropped by the claims that find it paused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import asyncpg

from job_service.adapters.postgres.vocabulary.holds import LIVE_WORKER_S, no_worker_for_version
from job_service.adapters.postgres.vocabulary.outbox_rows import dispatch_key, dispatch_rows
from job_service.adapters.postgres.vocabulary.statuses import WAITING, sql_status, statuses_sql
from job_service.domain.claims import definition_id
from job_service.domain.holds import WaitingFacts
from job_service.domain.lifecycle import LEASED, JobStatus
from job_service.domain.queues import QueueState
from shared.errors import ErrorCode

_LEASED = statuses_sql(LEASED)

PAUSE = """
INSERT INTO queue_controls (queue, paused, paused_at, paused_by) VALUES ($1, true, now(), $2)
ON CONFLICT (queue) DO UPDATE SET paused = true,
    paused_at = CASE WHEN queue_controls.paused THEN queue_controls.paused_at ELSE now() END,
    paused_by = CASE WHEN queue_controls.paused THEN queue_controls.paused_by ELSE $2 END
"""

RESUME = f"""
WITH resumed AS (
    UPDATE queue_controls SET paused = false, paused_at = NULL, paused_by = NULL
    WHERE queue = $1 AND paused
    RETURNING queue
), waiting AS (
    SELECT j.id, j.queue FROM jobs j JOIN resumed r ON r.queue = j.queue
    WHERE j.status IN {WAITING}
), dispatch AS (
    {
    dispatch_rows(
        "waiting",
        dispatch_key("src.id", "resume", "(extract(epoch FROM now()) * 1e6)::bigint::text"),
        trace="NULL::jsonb",
    )
}
)
SELECT count(*) FROM resumed
"""

QUEUES = f"""
SELECT q.queue,
       coalesce(c.paused, false) AS paused, c.paused_at, c.paused_by,
       (SELECT count(*) FROM jobs j WHERE j.queue = q.queue AND j.status IN {WAITING})
           AS waiting,
       -- a paused queue's jobs are not eligible: no claim grants them until it resumes
       (SELECT count(*) FROM jobs j WHERE j.queue = q.queue AND j.status IN {WAITING}
          AND (j.next_run_at IS NULL OR j.next_run_at <= now())
          AND NOT coalesce(c.paused, false)) AS eligible,
       (SELECT count(*) FROM jobs j WHERE j.queue = q.queue AND j.status IN {_LEASED})
           AS running
FROM unnest($1::text[]) AS q(queue)
LEFT JOIN queue_controls c ON c.queue = q.queue
ORDER BY q.queue
"""

# A worker record is live when its worker asked for work in the last $2 seconds. What
# each records is what it runs of the queues it claims from (claims.py): a definition
# loaded by a worker that never claims from its queue runs nowhere. NULL: no live record
# (nothing to judge by); an empty array: live workers, none running this queue's types.
_LIVE = "w.seen_at > now() - $2 * interval '1 second'"

WAITING_FACTS = f"""
SELECT j.queue, j.job_type, j.definition_version, j.next_run_at, j.concurrency_key,
       j.concurrency_limit, j.model_tier, j.error_code, now() AS now,
       coalesce((SELECT c.paused FROM queue_controls c WHERE c.queue = j.queue), false)
           AS paused,
       (SELECT count(*) FROM jobs r WHERE r.concurrency_key = j.concurrency_key
          AND r.status IN {_LEASED} AND r.concurrency_key IS NOT NULL) AS key_running,
       (SELECT count(*) FROM jobs r WHERE r.queue = j.queue AND r.status IN {_LEASED})
           AS queue_running,
       (SELECT b.blocked_until FROM rate_limits b WHERE b.key = j.model_tier) AS blocked_until,
       CASE WHEN EXISTS (SELECT 1 FROM worker_definitions w WHERE {_LIVE}) THEN
           coalesce((SELECT array_agg(DISTINCT d) FROM worker_definitions w,
                     unnest(w.definitions) d WHERE {_LIVE}), '{{}}')
       END AS live
FROM jobs j WHERE j.id = $1 AND j.status IN {WAITING}
"""

# Due jobs whose definition no live worker runs (for the gauge): a worker counts for the
# queues it claims from only, as for the hold.
WITHOUT_WORKER = f"""
SELECT count(*) FROM jobs j
WHERE j.status IN {WAITING} AND (j.next_run_at IS NULL OR j.next_run_at <= now())
  AND {no_worker_for_version("j", "$1")}
"""


# Jobs whose code sleeps or waits for a signal (ctx.sleep, ctx.wait_for_signal), not due
# yet: a woken one is due, and counted with the due jobs.
SUSPENDED = f"""
SELECT error_code, count(*) AS n FROM jobs
WHERE status = {sql_status(JobStatus.RETRYING)} AND error_code = ANY($1::text[])
  AND next_run_at > now()
GROUP BY error_code
"""


class QueueRepository:
    def __init__(self, pool: asyncpg.Pool, queue_limits: Mapping[str, int]) -> None:
        self._pool = pool
        self._queue_limits = dict(queue_limits)

    async def pause(self, queue: str, principal: str) -> None:
        await self._pool.execute(PAUSE, queue, principal)

    async def resume(self, queue: str) -> bool:
        """Resumes a paused queue (False: it was not paused) and re-issues its tokens."""
        return bool(await self._pool.fetchval(RESUME, queue))

    async def states(self, queues: Sequence[str]) -> list[QueueState]:
        rows = await self._pool.fetch(QUEUES, list(queues))
        return [
            QueueState(
                name=r["queue"],
                paused=r["paused"],
                paused_at=r["paused_at"],
                paused_by=r["paused_by"],
                waiting=r["waiting"],
                eligible=r["eligible"],
                running=r["running"],
                concurrency_limit=self._queue_limits.get(r["queue"], 0),
            )
            for r in rows
        ]

    async def waiting_facts(self, job_id: str, spent_tiers: Sequence[str]) -> WaitingFacts | None:
        """What explains why this waiting job is held back; None if it does not wait."""
        row = await self._pool.fetchrow(WAITING_FACTS, job_id, LIVE_WORKER_S)
        if row is None:
            return None
        live = row["live"]
        return WaitingFacts(
            queue=row["queue"],
            definition=definition_id(row["job_type"], row["definition_version"]),
            next_run_at=row["next_run_at"],
            now=row["now"],
            paused=row["paused"],
            concurrency_key=row["concurrency_key"],
            concurrency_limit=row["concurrency_limit"] or 0,
            key_running=row["key_running"],
            queue_limit=self._queue_limits.get(row["queue"], 0),
            queue_running=row["queue_running"],
            rate_key=row["model_tier"],
            rate_blocked_until=row["blocked_until"],
            rate_spent=row["model_tier"] in spent_tiers,
            live_definitions=frozenset(live) if live is not None else None,
            error_code=row["error_code"],
        )

    async def without_worker(self) -> int:
        """Due jobs that no live worker runs the definition version of."""
        return int(await self._pool.fetchval(WITHOUT_WORKER, LIVE_WORKER_S))

    async def suspended(self) -> dict[str, int]:
        codes = [ErrorCode.SUSPENDED_SLEEP.value, ErrorCode.SUSPENDED_SIGNAL.value]
        counts = {code: 0 for code in codes}
        for row in await self._pool.fetch(SUSPENDED, codes):
            counts[row["error_code"]] = row["n"]
        return counts
