"""The shapes every view is made of: aligned tables, times and durations, money, JSON for
scripts.

Times are shown in UTC, always with their zone: ISO 8601 with a ``Z``
(``2030-01-31T09:00:00Z``), with milliseconds where the order of close steps matters (a
timeline). Numbers from a ``google.protobuf.Struct`` (inputs, outputs, payloads) go
through the client library's ``plain``: a whole number reads ``29``, not ``29.0``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from durable_jobs_client import plain, to_python
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp


def as_dict(message: Message) -> dict[str, Any]:
    """The message as the JSON scripts get: proto field names, enums by name, whole
    numbers as integers."""
    value: dict[str, Any] = to_python(message, preserving_proto_field_name=True)
    return value


def as_json(value: Any) -> str:
    """One line of JSON (keys sorted: a Struct has no order)."""
    value = as_dict(value) if isinstance(value, Message) else plain(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def is_set(stamp: Timestamp) -> bool:
    return bool(stamp.seconds or stamp.nanos)


def moment(stamp: Timestamp) -> datetime:
    return datetime.fromtimestamp(stamp.seconds + stamp.nanos / 1e9, UTC)


def iso(at: datetime, *, ms: bool = False) -> str:
    """``2030-01-31T09:00:00Z`` (``.123Z`` with ``ms``), in UTC."""
    text = at.astimezone(UTC).isoformat(timespec="milliseconds" if ms else "seconds")
    return text.replace("+00:00", "Z")


def when(stamp: Timestamp, *, ms: bool = False) -> str:
    """The time in UTC with its zone, or ``-`` when unset."""
    return iso(moment(stamp), ms=ms) if is_set(stamp) else "-"


def duration(seconds: float) -> str:
    """``850ms``, ``4.2s``, ``3m05s``, ``2h03m``, ``1d02h``."""
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def between(start: Timestamp, end: Timestamp) -> float:
    return (moment(end) - moment(start)).total_seconds()


def relative(stamp: Timestamp, now: datetime) -> str:
    """``2030-01-31T09:00:00Z (in 4.2s)`` or ``(... ago)``."""
    ahead = (moment(stamp) - now).total_seconds()
    return f"{when(stamp)} ({'in ' + duration(ahead) if ahead >= 0 else duration(-ahead) + ' ago'})"


def money(usd: float) -> str:
    """US dollars to 4 significant digits below a dollar (``$0.00012``), to the cent
    above (``$1.23``); ``$0`` for nothing."""
    if usd == 0:
        return "$0"
    if abs(usd) >= 1:
        return f"${usd:,.2f}"
    places = 3 - math.floor(math.log10(abs(usd)))
    return "$" + f"{usd:.{places}f}".rstrip("0").rstrip(".")


def count(n: int, noun: str) -> str:
    """``1 job``, ``5 jobs``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def block(fields: Sequence[tuple[str, str]]) -> list[str]:
    """``key  value`` lines, the values aligned."""
    width = max(len(k) for k, _ in fields)
    return [f"{k.ljust(width)}  {v}" for k, v in fields]


def enum_name(enum: Any, value: int, prefix: str) -> str:
    """``OVERLAP_POLICY_CANCEL_PREVIOUS`` -> ``cancel-previous``; 0 (unset) -> ``default``."""
    if not value:
        return "default"
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower().replace("_", "-")
    except ValueError:
        return str(value)
