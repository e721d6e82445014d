"""GetUsage on PostgreSQL: one statement over the three places a provider call's usage
can be, each call in exactly one of them at any moment:

- ``usage_logs`` joined to their jobs: the calls of jobs still stored;
- ``usage_daily_job_types``: calls of deleted jobs, folded per job type (migration 0015);
- ``usage_daily`` beyond its per-type rows: calls folded without a job type (before 0015,
  or by an older replica), reported under job type "".

``usage_daily`` is the truth for deleted jobs: a per-type row counts only beside its
``usage_daily`` row, so the folded totals are ``usage_daily``'s even if an older replica
pruned ``usage_daily`` alone during a rolling deploy.

The retention statement deletes a job's usage rows and folds them into both aggregates in
one transaction, and this is one statement (one snapshot), so no call is counted twice or
missed. Usage rows whose job is gone without retention (``job_id`` set NULL by the foreign
key) belong to no user and are not reported.
"""

from __future__ import annotations

import asyncpg

from job_service.domain.usage import Grouping, UsageGroup, UsageQuery, UsageTotals

# The columns each grouping adds to the GROUP BY, in the order groups are sorted.
_KEYS: dict[Grouping, tuple[str, ...]] = {
    Grouping.DAY: ("day",),
    Grouping.USER: ("user_id",),
    Grouping.JOB_TYPE: ("job_type",),
    Grouping.MODEL: ("provider", "model"),
}
_MEASURES = ("calls", "failed_calls", "input_tokens", "output_tokens", "cost_usd")
_AGGREGATE_KEY = ("user_id", "day", "provider", "model")


# $1 user (NULL: every user), $2 start, $3 end (timestamptz, UTC midnights), $4 limit.
def _days(t: str) -> str:
    """The aggregate rows of table alias ``t`` in the query's days and of its user."""
    return (
        f"{t}.day >= ($2::timestamptz AT TIME ZONE 'UTC')::date"
        f" AND {t}.day < ($3::timestamptz AT TIME ZONE 'UTC')::date"
        f" AND ($1::text IS NULL OR {t}.user_id = $1)"
    )


USAGE_ROWS = f"""
    SELECT j.user_id, j.job_type, u.provider, u.model,
           (u.created_at AT TIME ZONE 'UTC')::date AS day,
           (NOT u.reused)::int AS calls,  -- a reused step was no provider call
           (u.error_code IS NOT NULL)::int AS failed_calls, u.input_tokens::bigint,
           u.output_tokens::bigint, u.cost_usd
    FROM usage_logs u JOIN jobs j ON j.id = u.job_id
    WHERE u.created_at >= $2::timestamptz AND u.created_at < $3::timestamptz
      AND ($1::text IS NULL OR j.user_id = $1)
    UNION ALL
    SELECT t.user_id, t.job_type, t.provider, t.model, t.day, {", ".join(_MEASURES)}
    FROM usage_daily_job_types t WHERE {_days("t")} AND EXISTS (
        SELECT 1 FROM usage_daily d
        WHERE ({", ".join(f"d.{k}" for k in _AGGREGATE_KEY)})
            = ({", ".join(f"t.{k}" for k in _AGGREGATE_KEY)}))
    UNION ALL
    SELECT d.user_id, '', d.provider, d.model, d.day,
           {", ".join(f"d.{m} - coalesce(t.{m}, 0)" for m in _MEASURES)}
    FROM usage_daily d
    LEFT JOIN (
        SELECT {", ".join(_AGGREGATE_KEY)}, {", ".join(f"sum({m}) AS {m}" for m in _MEASURES)}
        FROM usage_daily_job_types t WHERE {_days("t")}
        GROUP BY {", ".join(_AGGREGATE_KEY)}
    ) t USING ({", ".join(_AGGREGATE_KEY)})
    WHERE {_days("d")}
      AND ({", ".join(f"d.{m}" for m in _MEASURES)})
          IS DISTINCT FROM ({", ".join(f"coalesce(t.{m}, 0)" for m in _MEASURES)})
"""


def usage_query(group_by: frozenset[Grouping]) -> str:
    """The statement for one set of groupings (its columns come from ``_KEYS`` only)."""
    keys = [k for g, columns in _KEYS.items() if g in group_by for k in columns]
    sums = ", ".join(f"coalesce(sum({m}), 0)::{_type(m)} AS {m}" for m in _MEASURES)
    if not keys:  # the grand total: one row, zeros when there is no usage
        return f"SELECT {sums} FROM ({USAGE_ROWS}) r LIMIT $4"
    listed = ", ".join(keys)
    return (
        f"SELECT {listed}, {sums} FROM ({USAGE_ROWS}) r "
        f"GROUP BY {listed} ORDER BY {listed} LIMIT $4"
    )


def _type(measure: str) -> str:
    return "numeric(20, 6)" if measure == "cost_usd" else "bigint"


class UsageReportRepository:
    """GetUsage's statement on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def usage(self, query: UsageQuery, limit: int) -> list[UsageGroup]:
        rows = await self._pool.fetch(
            usage_query(query.group_by), query.user_id, query.start, query.end, limit
        )
        return [_group(row) for row in rows if query.group_by or row["calls"]]


def _group(row: asyncpg.Record) -> UsageGroup:
    keys = set(row.keys())
    return UsageGroup(
        totals=UsageTotals(*(row[m] for m in _MEASURES)),
        day=row["day"] if "day" in keys else None,
        provider=row["provider"] if "provider" in keys else "",
        model=row["model"] if "model" in keys else "",
        job_type=row["job_type"] if "job_type" in keys else "",
        user_id=row["user_id"] if "user_id" in keys else "",
    )
