"""Usage: what provider calls cost over whole UTC days (UsageService.GetUsage, every user's
or one user's), as a chart of cost per day (``console.chart``, SVG drawn on the server) and
tables by model, job type and user, the most expensive first. Costs are the exact
``Decimal``s the service sends, shown with ``chart.money``'s precision."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from durable_jobs_client.usage import Grouping, Usage, UsageGroup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console.chart import bars, money
from console.sessions import Session
from console.site import Site

DEFAULT_DAYS = 30
MAX_DAYS = 400  # job_service's longest range
# Rows of each table; the rest are summed into one "others" row.
TOP_ROWS = 50


def range_of(request: Request) -> tuple[date, date]:
    """[start, end) from ``start`` and ``end`` (YYYY-MM-DD, ``end`` inclusive as typed);
    the last ``DEFAULT_DAYS`` days by default. ValueError with a message to show."""
    today = datetime.now(UTC).date()
    given_start = request.query_params.get("start", "").strip()
    given_end = request.query_params.get("end", "").strip()
    try:
        last = date.fromisoformat(given_end) if given_end else today
        start = (
            date.fromisoformat(given_start)
            if given_start
            else last - timedelta(days=DEFAULT_DAYS - 1)
        )
    except ValueError:
        raise ValueError("Dates are YYYY-MM-DD (UTC days).") from None
    end = last + timedelta(days=1)
    if start >= end:
        raise ValueError("The first day comes before the last.")
    if (end - start).days > MAX_DAYS:
        raise ValueError(f"At most {MAX_DAYS} days at a time.")
    return start, end


def ranked(groups: Sequence[UsageGroup]) -> tuple[list[UsageGroup], int]:
    """The ``TOP_ROWS`` costliest groups and how many more there are."""
    order = sorted(groups, key=lambda g: (-g.totals.cost_usd, -g.totals.calls, str(g)))
    return order[:TOP_ROWS], max(0, len(order) - TOP_ROWS)


async def usage_page(site: Site, request: Request, session: Session) -> Response:
    try:
        start, end = range_of(request)
    except ValueError as error:
        return site.error(session, 400, "Bad request", str(error))
    user_id = request.query_params.get("user_id", "").strip()
    jobs = site.jobs(session.token)
    groupings: tuple[Grouping, ...] = ("day", "model", "job_type", "user")
    answers: list[Usage] = list(
        await asyncio.gather(
            *(jobs.get_usage(start, end, group_by=[g], user_id=user_id) for g in groupings)
        )
    )
    by = dict(zip(groupings, answers, strict=True))
    per_day = {
        g.day: (g.totals.cost_usd, g.totals.calls) for g in by["day"].groups if g.day is not None
    }
    tables = {g: ranked(by[g].groups) for g in ("model", "job_type", "user")}
    return site.page(
        "usage.html",
        session,
        nav="usage",
        start=start,
        last=end - timedelta(days=1),
        user_id=user_id,
        totals=by["day"].totals,
        chart=bars(per_day, start, end),
        days=sorted(by["day"].groups, key=lambda g: g.day or start),
        tables=tables,
        money=money,
    )


def routes(site: Site) -> list[Route]:
    return [Route("/usage", site.guarded(usage_page))]
