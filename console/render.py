"""Turning protobuf messages into what the templates show; the Jinja environment.

Autoescaping is on for every template: job output, artifacts and error text are data from
users and models, never markup. Status and hold names, and which statuses are terminal or
retryable, are the client library's (``durable_jobs_client.statuses``).

Every Struct (input, output, an artifact's payload) is shown through the client library's
``to_python``, whole numbers as integers (29, not the 29.0 a Struct carries). Every time is
UTC and says so; the timeline's to the millisecond. Durations: ``console.timing``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from durable_jobs_client import to_python
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import (
    RETRYABLE,
    STATUS_NAMES,
    has_hold,
    hold_name,
    is_terminal,
    status_name,
)
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from jinja2 import Environment, FileSystemLoader, select_autoescape

from console import timing
from console.ids import short_id

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


def when(stamp: Timestamp) -> str:
    """A time as every page writes it: to the second, in UTC, and saying so."""
    if not timing.is_set(stamp):
        return ""
    return stamp.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def when_ms(stamp: Timestamp) -> str:
    """``when`` to the millisecond (the timeline: steps a few ms apart stay in order)."""
    if not timing.is_set(stamp):
        return ""
    at = stamp.ToDatetime(tzinfo=UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def ahead(stamp: Timestamp) -> str:
    """``when``, for a time still to come; "" once it has passed (or when unset)."""
    if not timing.is_set(stamp):
        return ""
    return when(stamp) if stamp.ToDatetime(tzinfo=UTC) > datetime.now(UTC) else ""


def as_json(message: Message | None) -> str:
    """A Struct (input, output, an artifact's payload) as JSON, whole numbers as integers
    (``durable_jobs_client.plain``): ``29`` reads 29, not the 29.0 a Struct carries."""
    if message is None:
        return ""
    return plain_json(to_python(message))


# An error from an earlier attempt: the job has moved on to another.
_MOVED_ON = {
    job_pb2.JOB_STATUS_QUEUED,
    job_pb2.JOB_STATUS_RUNNING,
    job_pb2.JOB_STATUS_CANCEL_REQUESTED,
}


def error_of(job: job_pb2.Job) -> str:
    """Which attempt a job's error belongs to, for a list row: ``attempt 2`` as the
    service says (``error_attempt``); from a service too old to say, an error the job has
    moved on from (queued or running again) is ``an earlier attempt``; else ""."""
    if not job.error_code:
        return ""
    if job.error_attempt:
        return f"attempt {job.error_attempt}"
    return "an earlier attempt" if job.status in _MOVED_ON and job.attempt_count else ""


def cost(usd: float) -> str:
    """Dollars to 4 significant digits: ``$0`` for nothing, ``$0.001234``, ``$12.35``,
    ``$1,235``."""
    if not usd:
        return "$0"
    if abs(usd) >= 1000:
        return f"${usd:,.0f}"
    text = f"{usd:.4g}"
    if "e" in text:  # below 1e-4: written out, not in exponent notation
        digits = 3 - int(f"{usd:e}".split("e")[1])
        text = f"{usd:.{digits}f}".rstrip("0")
    return f"${text}"


def hash_label(value: str) -> str:
    """An output hash's scheme and the first 12 hex digits of its digest:
    ``jcs:sha256:1a2b3c4d5e6f…`` (the page has the whole hash to hover and copy)."""
    scheme, _, digest = value.rpartition(":")
    cut = digest[:12] + ("…" if len(digest) > 12 else "")
    return f"{scheme}:{cut}" if scheme else cut


def size(n: int) -> str:
    """``70400`` -> ``68.8 KiB (70,400 bytes)``."""
    if n < 1024:
        return f"{n:,} bytes"
    for unit, scale in (("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"  # pragma: no cover - the loop always returns


def plain_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)


def schema(text: str) -> str:
    try:
        return plain_json(json.loads(text))
    except ValueError:
        return text


def hold_label(reason: int) -> str:
    """``REASON_QUEUE_PAUSED`` -> ``queue paused``."""
    return hold_name(reason).replace("_", " ")


def policy_label(value: int) -> str:
    """``DEPENDENCY_POLICY_FAIL`` -> ``fail``; unset -> ``fail`` (the service's default)."""
    if not value:
        return "fail"
    try:
        return str(job_pb2.DependencyPolicy.Name(value)).removeprefix("DEPENDENCY_POLICY_").lower()
    except ValueError:
        return str(value)


def ago(at: datetime) -> str:
    return at.strftime("%H:%M:%S UTC")


def clock_short(at: datetime) -> str:
    """``12:04``: a window's ends, the page saying UTC once."""
    return at.strftime("%H:%M")


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        status=status_name,
        when=when,
        as_json=as_json,
        schema=schema,
        clock=ago,
        clock_short=clock_short,
        hold=hold_label,
        ahead=ahead,
        policy=policy_label,
        short_id=short_id,
        when_ms=when_ms,
        cost=cost,
        hash_label=hash_label,
        size=size,
        error_of=error_of,
        until=timing.until,
        span=timing.between,
    )
    env.globals.update(
        is_terminal=is_terminal,
        has_hold=has_hold,
        RETRYABLE=RETRYABLE,
        STATUS_LABELS=list(STATUS_NAMES),
        waited=timing.waited,
        ran=timing.ran,
        steps=timing.steps,
        INPUT_SHOWN=job_pb2.INPUT_STATE_SHOWN,
        INPUT_TOO_LARGE=job_pb2.INPUT_STATE_TOO_LARGE,
        INPUT_REMOVED=job_pb2.INPUT_STATE_REMOVED,
        RUNNING=job_pb2.JOB_STATUS_RUNNING,
        RETRYING=job_pb2.JOB_STATUS_RETRYING,
        CREATED=job_pb2.JOB_STATUS_CREATED,
    )
    return env
