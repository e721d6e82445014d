"""CreateJobs on PostgreSQL: many new jobs in one statement, each judged as CreateJob judges
one (idempotency key, quotas), with its snapshot, timeline event and dispatch row.

The items travel as one JSON array (``jsonb_to_recordset``) with ids chosen here, so that
each inserted row finds its item again. Quotas are counted per user in the order of the
items: the n-th new job of a user in the batch is admitted when the user's unfinished jobs
plus n stay within the limit, and likewise for the day's count; while a user's cost today
is within the daily budget, all of the user's items may pass it (creating costs nothing):
``domain.quotas.admits``, rendered by ``vocabulary/quotas.py`` as CreateJob's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from job_service.adapters.postgres.rows import job_from_row
from job_service.adapters.postgres.vocabulary.line import (
    FAIR_QUANTUM,
    LOCK_LINES,
    lines_of,
    place_in_line,
)
from job_service.adapters.postgres.vocabulary.new_job import (
    FIND_BY_IDEMPOTENCY_KEY,
    KEY_COLUMNS,
    NEW_JOB_COLUMNS,
    SNAPSHOT_FIELDS,
    new_job_record,
    new_job_rows,
    queued_or_created,
    record_type,
    record_values,
    snapshot_row,
    snapshot_values,
    user_keys,
)
from job_service.adapters.postgres.vocabulary.outbox_rows import handed, handed_messages
from job_service.adapters.postgres.vocabulary.quotas import counted, usage, within_quotas
from job_service.domain.jobs import NewJob
from job_service.domain.outbox import OutboxMessage
from job_service.domain.quotas import QuotaRefusal, Quotas
from job_service.ports.jobs import Stored

_ITEM = {"idx": "int", **NEW_JOB_COLUMNS, **SNAPSHOT_FIELDS}
_MAX_ACTIVE, _DAILY, _BUDGET = "$2::int", "$3::int", "$5::numeric"
_OWNER = "$6::text"  # the replica whose dispatcher publishes the rows, or NULL

CREATE_JOBS = f"""
WITH new AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS n({record_type(_ITEM)})
), usage AS (
    SELECT u.user_id,
        {usage("u.user_id", _MAX_ACTIVE, _DAILY, _BUDGET)}
    FROM (SELECT DISTINCT user_id FROM new) u
), fresh AS (
    -- items whose idempotency key names no job yet, numbered per user in item order
    SELECT n.*, row_number() OVER (PARTITION BY n.user_id ORDER BY n.idx) AS rank
    FROM new n
    WHERE n.idempotency_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM jobs e WHERE e.user_id = n.user_id AND e.job_type = n.job_type
                               AND e.idempotency_key = n.idempotency_key)
), keyed AS (
    SELECT f.idx, {", ".join(f"f.{c}" for c in NEW_JOB_COLUMNS if c not in KEY_COLUMNS)},
           {user_keys("f")},
           -- jobs of one fairness key in one batch are spaced as one-by-one creates are
           row_number() OVER (PARTITION BY f.queue, replace(f.fairness_key, '{{user}}', f.user_id),
                                           f.priority ORDER BY f.idx) - 1 AS behind
    FROM fresh f JOIN usage u ON u.user_id = f.user_id
    WHERE {within_quotas("u", "f.rank", _MAX_ACTIVE, _DAILY, _BUDGET)}
), {
    new_job_rows(
        {
            **record_values("new"),
            "status": queued_or_created("new"),
            "queued_at": "now()",
            "sched_key": f"{place_in_line('new')} + new.behind * {FAIR_QUANTUM}",
        },
        "FROM keyed new ORDER BY new.idx",
        snapshot=snapshot_row(
            "n.id", snapshot_values("n"), "FROM inserted JOIN new n ON n.id = inserted.id::uuid"
        ),
        status="status",
        trace="$4::jsonb",
        owner=_OWNER,
        due="coalesce(src.next_run_at, now())",
    )
}, counted AS (
    {counted("inserted", _DAILY)}
)
SELECT n.idx AS item, inserted.*,
       u.active + coalesce(f.rank, 1) - 1 AS quota_active,
       u.today + coalesce(f.rank, 1) - 1 AS quota_today,
       u.spent AS quota_spent, {handed("n.idx = 0", "dispatch")}
FROM new n
JOIN usage u ON u.user_id = n.user_id
LEFT JOIN fresh f ON f.idx = n.idx
LEFT JOIN inserted ON inserted.id::uuid = n.id
ORDER BY n.idx
"""


class BatchRepository:
    """CreateJobs' statement on one asyncpg pool. ``owner``: the replica whose dispatcher
    publishes the due rows it writes (None: they wait for a claim)."""

    def __init__(self, pool: asyncpg.Pool, owner: str | None = None) -> None:
        self._pool = pool
        self._owner = owner

    async def create_many(
        self, news: Sequence[NewJob], quotas: Quotas, trace: dict[str, str] | None = None
    ) -> tuple[list[Stored], list[OutboxMessage]]:
        """Stores each job as ``NewJobRepository.create`` stores one: an outcome per job,
        in order, and the due rows written claimed for the owner's dispatcher, to hand over.
        Idempotency keys must be distinct within ``news`` (the use case sees to it)."""
        items = [
            {"idx": n, **_json_ready(new_job_record(new, _ITEM_FIELDS))}
            for n, new in enumerate(news)
        ]
        lines = lines_of((n.queue, n.fairness_key, n.user_id, n.priority) for n in news)
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                # places in line taken under the lines' locks, as CreateJob takes its own
                if lines[0]:
                    await conn.execute(LOCK_LINES, *lines)
                rows = await conn.fetch(
                    CREATE_JOBS,
                    items,
                    quotas.max_active,
                    quotas.daily,
                    trace,
                    quotas.daily_cost_usd,
                    self._owner,
                )
            outcomes: list[Stored | None] = [None] * len(news)
            lookups: list[int] = []
            for row in rows:
                n = row["item"]
                if row["id"] is not None:
                    outcomes[n] = (job_from_row(row), True)
                    continue
                outcomes[n] = QuotaRefusal(
                    active=row["quota_active"], today=row["quota_today"], spent=row["quota_spent"]
                )
                if news[n].idempotency_key is not None:
                    lookups.append(n)
            # a key used before (or by a concurrent writer, committed once ON CONFLICT
            # returned): the existing job, even at a quota limit
            for n in lookups:
                new = news[n]
                existing = await conn.fetchrow(
                    FIND_BY_IDEMPOTENCY_KEY, new.user_id, new.job_type, new.idempotency_key
                )
                if existing is not None:
                    outcomes[n] = (job_from_row(existing), False)
        assert all(o is not None for o in outcomes), "an answer for every item"
        return [o for o in outcomes if o is not None], handed_messages(rows)


_ITEM_FIELDS = {**NEW_JOB_COLUMNS, **SNAPSHOT_FIELDS}


def _json_ready(record: dict[str, Any]) -> dict[str, Any]:
    """Times as ISO 8601 text (jsonb_to_recordset reads them back as timestamptz)."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in record.items()}
