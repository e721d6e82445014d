"""Per-user CreateJob limits and the refusal that names the one reached. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Quotas:
    """Per-user CreateJob limits; 0 turns one off. ``daily_cost_usd``: what a user's
    provider calls may cost per UTC day before creates are refused."""

    max_active: int = 0
    daily: int = 0
    daily_cost_usd: Decimal = Decimal(0)


@dataclass(frozen=True)
class QuotaRefusal:
    """CreateJob stored nothing: the user is at a limit (``active`` / ``today`` /
    ``spent`` — today's cost in US dollars, 0 when the budget is off — say which)."""

    active: int
    today: int
    spent: Decimal = Decimal(0)


def within(used: int, asked: int, limit: int) -> bool:
    """A count limit's gate: ``asked`` more on top of ``used`` stay within ``limit`` (0: no
    limit). Rendered in SQL by ``adapters/postgres/vocabulary/quotas.py``."""
    return limit == 0 or used + asked <= limit


def admits(quotas: Quotas, active: int, today: int, spent: Decimal, nth: int = 1) -> bool:
    """Whether the ``nth`` new job of one user in one request (CreateJob's only job is the
    1st) may be created: the user's unfinished jobs and the day's jobs counted with it stay
    within their limits, and the day's cost has not reached the budget (creating costs
    nothing, so every job of a request passes a budget not yet spent)."""
    return (
        within(active, nth, quotas.max_active)
        and within(today, nth, quotas.daily)
        and (quotas.daily_cost_usd == 0 or spent < quotas.daily_cost_usd)
    )
