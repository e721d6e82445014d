"""Usage reports (GetUsage): what a question about usage asks, and what it is answered
with. Cost is a Decimal all the way (the columns are NUMERIC), so no cent is lost to
binary floating point."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum


class Grouping(StrEnum):
    """What usage rows are grouped by (several may be combined)."""

    DAY = "day"
    MODEL = "model"  # provider and model
    JOB_TYPE = "job_type"
    USER = "user"


@dataclass(frozen=True)
class UsageQuery:
    """Usage over [start, end) (UTC midnights), of one user or (None) of every user."""

    user_id: str | None
    start: datetime
    end: datetime
    group_by: frozenset[Grouping] = frozenset()


@dataclass(frozen=True)
class UsageTotals:
    calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    def __add__(self, other: UsageTotals) -> UsageTotals:
        return UsageTotals(
            self.calls + other.calls,
            self.failed_calls + other.failed_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
        )


@dataclass(frozen=True)
class UsageGroup:
    """One group's totals; the keys of groupings not asked for are empty (day None)."""

    totals: UsageTotals
    day: date | None = None
    provider: str = ""
    model: str = ""
    job_type: str = ""
    user_id: str = ""
