"""The time options of ``jobctl create``: ``--run-at`` (an RFC 3339 time) and ``--delay``
(seconds, or a number with a unit). Checked before anything is sent: a value these refuse
is a usage error (exit 2) naming the option and the form it wants.

How far ahead a job may be scheduled is the job service's decision (it answers
INVALID_ARGUMENT naming the field), not repeated here.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DELAY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)?$")
# What google.protobuf.Duration can hold (about 10,000 years).
_MAX_DURATION_S = 315_576_000_000


def delay(text: str) -> timedelta:
    """``90`` (seconds), ``90s``, ``1500ms``, ``5m``, ``1.5h``, ``2d``; not negative."""
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r}: a delay cannot be negative")
    found = _DELAY.match(text.strip().lower())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a delay: give seconds (e.g. 90) or a number with a unit "
            "(ms, s, m, h, d), e.g. 90s, 5m, 1h"
        )
    seconds = float(found.group(1)) * _UNITS[found.group(2) or "s"]
    if seconds > _MAX_DURATION_S:
        raise argparse.ArgumentTypeError(f"{text!r} is too long a delay")
    return timedelta(seconds=seconds)


def run_at(text: str) -> datetime:
    """An RFC 3339 time with its offset: ``2030-01-31T09:00:00Z``,
    ``2030-01-31T10:00:00+01:00``."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an RFC 3339 time with a zone, e.g. 2030-01-31T09:00:00Z "
            "or 2030-01-31T10:00:00+01:00"
        )
    if not 1 < moment.year < 9999:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range")
    return moment
