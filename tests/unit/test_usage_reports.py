"""GetUsage's use case on a fake store: what it asks the store, the totals it adds up, and
the queries it refuses (whole UTC days, 400 days at most, known groupings once, a user
unless an admin asks, and at most MAX_GROUPS groups)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from job_service.domain.usage import Grouping, UsageGroup, UsageQuery, UsageTotals
from job_service.usecases.usage import MAX_GROUPS, UsageReports
from shared.errors import InvalidInput
from tests.support.fakes import FakeUsageStore

START = datetime(2026, 11, 1, tzinfo=UTC)
END = datetime(2026, 12, 1, tzinfo=UTC)


def _group(cost: str, calls: int = 1, **keys: str) -> UsageGroup:
    return UsageGroup(UsageTotals(calls, 0, 10, 5, Decimal(cost)), **keys)


async def test_totals_add_up_exactly_and_the_query_is_passed_on() -> None:
    store = FakeUsageStore([_group("0.100001", user_id="a"), _group("0.200002", user_id="b")])

    report = await UsageReports(store).get_usage(
        "", START, END, [Grouping.USER, Grouping.DAY], any_user=True
    )

    assert report.totals == UsageTotals(2, 0, 20, 10, Decimal("0.300003"))
    assert [g.user_id for g in report.groups] == ["a", "b"]
    [(query, limit)] = store.asked
    assert query == UsageQuery(None, START, END, frozenset({Grouping.USER, Grouping.DAY}))
    assert limit == MAX_GROUPS + 1


async def test_without_groupings_only_the_totals_are_answered() -> None:
    store = FakeUsageStore([_group("1.5", calls=3)])

    report = await UsageReports(store).get_usage("alice", START, END, [], any_user=False)

    assert (report.groups, report.totals.calls) == ([], 3)
    assert store.asked[0][0].user_id == "alice"


async def test_more_groups_than_the_cap_are_refused() -> None:
    store = FakeUsageStore([_group("0", user_id=str(n)) for n in range(MAX_GROUPS + 1)])

    with pytest.raises(InvalidInput) as refused:
        await UsageReports(store).get_usage("a", START, END, [Grouping.DAY], any_user=False)

    assert [v.field for v in refused.value.violations] == ["group_by"]


@pytest.mark.parametrize(
    ("user", "start", "end", "group_by", "any_user", "fields"),
    [
        ("", START, END, [], False, ["user_id"]),
        ("a\x00", START, END, [], True, ["user_id"]),
        ("a", None, None, [], False, ["start_time", "end_time"]),
        ("a", START + timedelta(hours=1), END, [], False, ["start_time"]),
        ("a", START.replace(tzinfo=timezone(timedelta(hours=2))), END, [], False, ["start_time"]),
        ("a", START.replace(tzinfo=None), END, [], False, ["start_time"]),
        ("a", END, START, [], False, ["end_time"]),
        ("a", START, START, [], False, ["end_time"]),
        ("a", START, START + timedelta(days=401), [], False, ["end_time"]),
        ("a", START, END, [None], False, ["group_by"]),
        ("a", START, END, [Grouping.DAY, Grouping.DAY], False, ["group_by"]),
    ],
)
async def test_malformed_queries_are_refused_naming_their_fields(
    user: str,
    start: datetime | None,
    end: datetime | None,
    group_by: list[Grouping | None],
    any_user: bool,
    fields: list[str],
) -> None:
    store = FakeUsageStore([])

    with pytest.raises(InvalidInput) as refused:
        await UsageReports(store).get_usage(user, start, end, group_by, any_user=any_user)

    assert [v.field for v in refused.value.violations] == fields
    assert store.asked == []


async def test_400_days_of_whole_days_are_accepted() -> None:
    store = FakeUsageStore([])
    end = START + timedelta(days=400)

    report = await UsageReports(store).get_usage("a", START, end, [], any_user=False)

    assert report.totals == UsageTotals()
    assert store.asked[0][0].end == end
    assert date(2026, 11, 1) == store.asked[0][0].start.date()
