"""GetUsage: tokens, cost, calls and failed calls over whole UTC days, grouped by day,
model, job type and user. A client sees the one user it names; an admin any user or all.
Usage is reported by the day of the call, and the daily aggregates that outlive deleted
jobs (retention) are kept per UTC day, so a range is whole UTC days: a bound inside a day
could not be answered exactly."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from job_service.domain.checks import require_name
from job_service.domain.usage import Grouping, UsageGroup, UsageQuery, UsageTotals
from job_service.ports.usage import UsageStore
from shared.errors import FieldViolation, InvalidInput

MAX_RANGE = timedelta(days=400)
# Groups one answer holds at most; more is refused rather than paged: a report that large
# is a query to narrow, and a bounded answer needs no page token.
MAX_GROUPS = 10_000


@dataclass(frozen=True)
class UsageReport:
    groups: list[UsageGroup]  # empty without groupings
    totals: UsageTotals


class UsageReports:
    def __init__(self, store: UsageStore) -> None:
        self._store = store

    async def get_usage(
        self,
        user_id: str,
        start: datetime | None,
        end: datetime | None,
        group_by: Iterable[Grouping | None],
        *,
        any_user: bool,
    ) -> UsageReport:
        """The usage of ``user_id`` over [start, end); with ``any_user`` (an admin) an
        empty ``user_id`` means every user. ``None`` in ``group_by`` is a grouping the
        caller sent that is not known. Raises InvalidInput naming every bad field."""
        query = _query(user_id, start, end, list(group_by), any_user=any_user)
        groups = await self._store.usage(query, MAX_GROUPS + 1)
        if len(groups) > MAX_GROUPS:
            raise InvalidInput(
                f"more than {MAX_GROUPS} groups",
                [FieldViolation("group_by", f"at most {MAX_GROUPS} groups: narrow the range")],
            )
        totals = sum((g.totals for g in groups), UsageTotals())
        return UsageReport(groups if query.group_by else [], totals)


def _query(
    user_id: str,
    start: datetime | None,
    end: datetime | None,
    group_by: list[Grouping | None],
    *,
    any_user: bool,
) -> UsageQuery:
    if user_id or not any_user:
        require_name("user_id", user_id)
    violations = []
    for name, bound in (("start_time", start), ("end_time", end)):
        if bound is None:
            violations.append(FieldViolation(name, "required: a UTC midnight"))
        elif bound.utcoffset() is None or bound.astimezone(UTC).timetz() != time(tzinfo=UTC):
            violations.append(FieldViolation(name, "a UTC midnight (whole days only)"))
    if not violations and start is not None and end is not None:
        if end <= start:
            violations.append(FieldViolation("end_time", "after start_time"))
        elif end - start > MAX_RANGE:
            violations.append(FieldViolation("end_time", f"at most {MAX_RANGE.days} days after"))
    groupings = [g for g in group_by if g is not None]
    if len(groupings) != len(group_by) or len(set(groupings)) != len(groupings):
        violations.append(FieldViolation("group_by", "known groupings, each at most once"))
    if violations:
        raise InvalidInput("the usage query is malformed", violations)
    assert start is not None and end is not None
    return UsageQuery(user_id or None, start, end, frozenset(groupings))
