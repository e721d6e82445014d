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
