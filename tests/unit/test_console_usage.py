"""The usage page's pieces without a service: costs from the exact Decimal at a sensible
precision, the chart's layout (a slot per day, bars to scale, round gridlines), and the page
over HTTP against the fake UsageService of ``durable_jobs_client.testing`` (every user's
usage, four groupings, the costliest first). Against a real job_service:
tests/integration/test_console_actions.py."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from durable_jobs_client.testing import FakeJobService
from durable_jobs_client.usage import Usage, UsageGroup, UsageTotals

from console.app import Console
from console.chart import HEIGHT, bars, money, nice_ceiling
from console.pages import usage
from console.sessions import SESSION_COOKIE
from console.settings import ConsoleSettings
from tests.unit.test_console_ids import SESSION_ID


@pytest.mark.parametrize(
    ("usd", "shown"),
    [
        ("0", "$0"),
        ("0.000000", "$0"),
        ("0.5", "$0.50"),
        ("0.001234567", "$0.001235"),
        ("0.00001", "$0.00001"),
        ("0.999999", "$1.00"),
        ("12.345", "$12.35"),  # half up, not to even
        ("1234567.891", "$1,234,567.89"),
        ("-3.2", "-$3.20"),
    ],
)
def test_costs_keep_cents_from_a_dollar_and_four_digits_below(usd: str, shown: str) -> None:
    assert money(Decimal(usd)) == shown


@pytest.mark.parametrize(
    ("value", "top"), [(0, 1.0), (0.03, 0.05), (0.2, 0.2), (7, 10.0), (12, 20.0), (240, 250.0)]
)
def test_the_y_axis_ends_on_a_round_figure(value: float, top: float) -> None:
    assert nice_ceiling(value) == pytest.approx(top)


def test_every_day_has_a_slot_and_bars_are_to_scale() -> None:
    start = date(2026, 11, 1)
    chart = bars(
        {date(2026, 11, 3): (Decimal("2"), 4), date(2026, 11, 5): (Decimal("1"), 1)},
        start,
        start + timedelta(days=7),
    )
    assert [b.day for b in chart.bars] == [start + timedelta(days=i) for i in range(7)]
    heights = [b.height for b in chart.bars]
    assert heights[2] == pytest.approx(2 * heights[4]) and heights[2] > 0
    assert [h for i, h in enumerate(heights) if i not in (2, 4)] == [0] * 5
    assert all(b.y + b.height == pytest.approx(chart.baseline) for b in chart.bars)
    assert chart.baseline < HEIGHT
    assert [t.label for t in chart.ticks] == ["$0", "$0.50", "$1.00", "$1.50", "$2.00"]
    xs = [b.x for b in chart.bars]
    assert xs == sorted(xs) and len({round(b - a, 6) for a, b in itertools.pairwise(xs)}) == 1


def test_a_long_range_labels_at_most_a_dozen_days() -> None:
    start = date(2026, 1, 1)
    chart = bars({}, start, start + timedelta(days=365))
    assert len(chart.bars) == 365 and len(chart.labels) <= 12
    assert all(b.height == 0 for b in chart.bars)


def totals(cost: str, calls: int = 1) -> UsageTotals:
    return UsageTotals(calls, 0, 10 * calls, calls, Decimal(cost))


def group(**fields: Any) -> UsageGroup:
    base: dict[str, Any] = dict.fromkeys(("day", "user_id", "job_type", "provider", "model"))
    return UsageGroup(**(base | fields))


def spent(
    start: date, end: date, *, group_by: Sequence[str] = (), user_id: str | None = None
) -> Usage:
    """UsageService's answer, by the grouping asked for."""
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    groups = {
        "day": [group(day=yesterday, totals=totals("1.5", 3))],
        "model": [group(provider="fake", model="fake-primary", totals=totals("1.5", 3))],
        "job_type": [group(job_type="synthetic", totals=totals("1.5", 3))],
        "user": [group(user_id=f"user-{i:03}", totals=totals(f"0.{i:03}")) for i in range(60)],
    }[group_by[0]]
    return Usage(groups, totals("1.5", 3), None)  # type: ignore[arg-type]


def asked(fake: FakeJobService) -> list[tuple[date, date, tuple[str, ...], str]]:
    return [
        (c["start"], c["end"], tuple(c["group_by"]), c["user_id"] or "")
        for c in fake.asked("get_usage")
    ]


@pytest.fixture
def fake() -> FakeJobService:
    service = FakeJobService(console_sessions={SESSION_ID: "test-admin"})
    service.on("get_usage", spent)
    return service


@pytest.fixture
async def browser(fake: FakeJobService) -> AsyncIterator[httpx.AsyncClient]:
    console = Console(ConsoleSettings())
    console.jobs = lambda token: fake.client()  # type: ignore[method-assign]
    _, cookie = console.sessions.new("admin-token", SESSION_ID)
    transport = httpx.ASGITransport(app=console.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
        client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
        yield client


async def test_the_page_asks_for_every_users_usage_in_four_groupings(
    browser: httpx.AsyncClient, fake: FakeJobService
) -> None:
    page = await browser.get("/usage")

    assert page.status_code == 200
    today = datetime.now(UTC).date()
    assert {a[2] for a in asked(fake)} == {("day",), ("model",), ("job_type",), ("user",)}
    assert {(a[0], a[1], a[3]) for a in asked(fake)} == {
        (today - timedelta(days=29), today + timedelta(days=1), "")
    }
    assert len(re.findall(r'<rect class="bar"', page.text)) == 30
    users = re.findall(r'user_id=(user-\d+)">', page.text)
    assert users[:3] == ["user-059", "user-058", "user-057"]  # the costliest first
    assert len(users) == usage.TOP_ROWS
    assert "… and 10 more, each costing less." in page.text
    assert 'id="usage-cost">$1.50<' in page.text


@pytest.mark.parametrize(
    "query",
    [
        {"start": "2026-02-30"},
        {"start": "2026-05-02", "end": "2026-05-01"},
        {"start": "2020-01-01"},
    ],
)
async def test_a_range_that_is_none_is_refused_before_asking(
    browser: httpx.AsyncClient, fake: FakeJobService, query: dict[str, str]
) -> None:
    page = await browser.get("/usage", params=query)
    assert page.status_code == 400
    assert asked(fake) == []
