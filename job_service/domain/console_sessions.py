"""A web console session's rules: how long it lives idle and in all. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.errors import FieldViolation, InvalidInput

DEFAULT_IDLE = timedelta(minutes=30)
DEFAULT_MAX_AGE = timedelta(hours=8)
IDLE_RANGE = (timedelta(minutes=1), timedelta(hours=8))
LONGEST = timedelta(hours=24)
# how many long-ended sessions one sign-in deletes (rows never pile up)
CLEAN_BATCH = 100
# how long an ended session's row is kept (for an operator asking "who was signed in")
KEPT_AFTER_END = timedelta(days=1)


@dataclass(frozen=True)
class Lifetime:
    idle: timedelta
    max_age: timedelta


def lifetime(idle: timedelta, max_age: timedelta) -> Lifetime:
    """A session's lifetime from a request's (zero: the defaults); InvalidInput outside
    the bounds."""
    idle = idle or DEFAULT_IDLE
    max_age = max_age or max(DEFAULT_MAX_AGE, idle)
    if not IDLE_RANGE[0] <= idle <= IDLE_RANGE[1]:
        raise InvalidInput(
            "idle_timeout is out of range",
            [FieldViolation("idle_timeout", "0 (30 minutes), or 1 minute to 8 hours")],
        )
    if not idle <= max_age <= LONGEST:
        raise InvalidInput(
            "max_age is out of range",
            [FieldViolation("max_age", "0 (8 hours), or idle_timeout to 24 hours")],
        )
    return Lifetime(idle, max_age)


@dataclass(frozen=True)
class OpenedSession:
    """A new session: its secret (given once, to the console) and when it ends at the
    latest."""

    secret: str
    principal: str
    expires_at: datetime
