"""Queries built on the fly (listings, bulk selections): bound parameters, and the
conditions of a job filter on ``jobs j``."""

from __future__ import annotations

from typing import Any

from job_service.domain.selection import JobFilter


def bind(args: list[Any], value: Any) -> str:
    """``value`` appended to a query's arguments; its ``$n`` placeholder."""
    args.append(value)
    return f"${len(args)}"


def filter_conditions(where: JobFilter, args: list[Any]) -> list[str]:
    """The SQL conditions on ``jobs j`` that ``where`` sets, their values appended to
    ``args`` (so that ``$n`` numbers continue from what ``args`` already holds)."""
    conditions: list[str] = []

    def arg(value: Any) -> str:
        return bind(args, value)

    if where.user_id is not None:
        conditions.append(f"j.user_id = {arg(where.user_id)}")
    if where.job_type is not None:
        conditions.append(f"j.job_type = {arg(where.job_type)}")
    if where.status is not None:
        conditions.append(f"j.status = {arg(where.status.value)}")
    if where.queue is not None:
        conditions.append(f"j.queue = {arg(where.queue)}")
    if where.target_type is not None:
        conditions.append(f"j.target_type = {arg(where.target_type)}")
    if where.target_id is not None:
        conditions.append(f"j.target_id = {arg(where.target_id)}")
    if where.id_suffix is not None:
        # a prefix range on the reversed digits: jobs_id_tail's expression, exactly
        tail = "(reverse(replace(j.id::text, '-', '')) COLLATE \"C\")"
        start = where.id_suffix[::-1]
        end = start[:-1] + chr(ord(start[-1]) + 1)
        conditions.append(f"{tail} >= {arg(start)} AND {tail} < {arg(end)}")
    if where.retried is not None:
        # a job's retries are found through its lineage (jobs_retry_lineage)
        made = (
            "EXISTS (SELECT 1 FROM jobs r WHERE r.retry_root_id = coalesce(j.retry_root_id, j.id)"
            " AND r.retried_from_job_id = j.id)"
        )
        conditions.append(made if where.retried else f"NOT {made}")
    if where.created_after is not None:
        conditions.append(f"j.created_at >= {arg(where.created_after)}")
    if where.created_before is not None:
        conditions.append(f"j.created_at < {arg(where.created_before)}")
    return conditions
