"""UsageService's answer as typed values: what provider calls cost, over whole UTC days,
with the cost as a ``Decimal`` (the service sends an exact decimal string: no binary
floating point on the way). ``JobsClient.get_usage`` and ``AsyncJobsClient.get_usage``
build the request here and answer a ``Usage``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Literal

from durable_jobs_client._pb.jobs.v1 import usage_service_pb2 as upb

Grouping = Literal["day", "model", "job_type", "user"]

GROUPINGS: dict[Grouping, upb.UsageGrouping] = {
    "day": upb.USAGE_GROUPING_DAY,
    "model": upb.USAGE_GROUPING_MODEL,
    "job_type": upb.USAGE_GROUPING_JOB_TYPE,
    "user": upb.USAGE_GROUPING_USER,
}


@dataclass(frozen=True)
class UsageTotals:
    calls: int
    failed_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal

    @classmethod
    def of(cls, totals: upb.UsageTotals) -> UsageTotals:
        return cls(
            totals.calls,
            totals.failed_calls,
            totals.input_tokens,
            totals.output_tokens,
            Decimal(totals.cost_usd or "0"),
        )


@dataclass(frozen=True)
class UsageGroup:
    """One group: the fields of the groupings asked for are set, the others None."""

    day: date | None
    user_id: str | None
    job_type: str | None
    provider: str | None
    model: str | None
    totals: UsageTotals


@dataclass(frozen=True)
class Usage:
    """The groups (ordered by day, user, job type, provider, model), the totals over the
    whole range, and the service's message as it came (``message``, for JSON output)."""

    groups: list[UsageGroup]
    totals: UsageTotals
    message: upb.GetUsageResponse


def usage_request(
    user_id: str, start: date, end: date, group_by: Sequence[Grouping]
) -> upb.GetUsageRequest:
    """[start, end) as UTC midnights; ``user_id`` "" asks for every user (``admin`` only)."""
    request = upb.GetUsageRequest(user_id=user_id, group_by=[GROUPINGS[g] for g in group_by])
    request.start_time.FromDatetime(datetime.combine(start, time(), UTC))
    request.end_time.FromDatetime(datetime.combine(end, time(), UTC))
    return request


def usage_of(response: upb.GetUsageResponse, group_by: Sequence[Grouping]) -> Usage:
    asked = set(group_by)

    def pick(value: str, grouping: Grouping) -> str | None:
        return value if grouping in asked else None

    groups = [
        UsageGroup(
            day=g.day.ToDatetime(UTC).date() if "day" in asked else None,
            user_id=pick(g.user_id, "user"),
            job_type=pick(g.job_type, "job_type"),
            provider=pick(g.provider, "model"),
            model=pick(g.model, "model"),
            totals=UsageTotals.of(g.totals),
        )
        for g in response.groups
    ]
    return Usage(groups, UsageTotals.of(response.totals), response)
