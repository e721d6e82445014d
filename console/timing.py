"""How long things took, as a job's page says it: the job's wait (created to first start)
and run (first start to end), each attempt's run on the timeline (its RUNNING step to the
step after it), and how far off a time still to come is ("in 4 s").

Everything here is computed from the timestamps the service sends; nothing is measured by
the console. A duration is written with the two largest units that matter ("850 ms",
"4.2 s", "3 min 12 s", "2 h 5 min", "3 d 4 h").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from durable_jobs_client.protos import job_pb2
from google.protobuf.timestamp_pb2 import Timestamp


def is_set(stamp: Timestamp) -> bool:
    return bool(stamp.seconds or stamp.nanos)


def seconds_between(start: Timestamp, end: Timestamp) -> float | None:
    """``end`` - ``start`` in seconds; None when either is unset or end comes first."""
    if not (is_set(start) and is_set(end)):
        return None
    delta = (end.seconds - start.seconds) + (end.nanos - start.nanos) / 1e9
    return delta if delta >= 0 else None


def span(seconds: float) -> str:
    """``0.85`` -> ``850 ms``; ``4.25`` -> ``4.2 s``; ``192`` -> ``3 min 12 s``."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        tenths = round(seconds, 1)
        return f"{tenths:g} s" if tenths < 60 else "1 min 0 s"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def between(start: Timestamp, end: Timestamp) -> str:
    """The span from ``start`` to ``end``; "" when it is not known."""
    delta = seconds_between(start, end)
    return "" if delta is None else span(delta)


def waited(job: job_pb2.Job) -> str:
    """From creation to the first attempt's start; "" before it started."""
    return between(job.created_at, job.started_at)


def ran(job: job_pb2.Job) -> str:
    """From the first attempt's start to the end; "" before both."""
    return between(job.started_at, job.finished_at)


def until(stamp: Timestamp, now: datetime | None = None) -> str:
    """``in 4 s`` for a time to come; ``due now`` once it has passed; "" when unset."""
    if not is_set(stamp):
        return ""
    at = stamp.ToDatetime(tzinfo=UTC)
    ahead = (at - (now or datetime.now(UTC))).total_seconds()
    return f"in {span(ahead)}" if ahead >= 0.5 else "due now"


@dataclass(frozen=True)
class Step:
    """One timeline row: the event, and for the start of an attempt (a step to RUNNING)
    how long that attempt ran (to the next step; "running" while it still does)."""

    event: job_pb2.JobEvent
    took: str


def steps(job: job_pb2.Job) -> list[Step]:
    events = list(job.events)
    rows = []
    for i, event in enumerate(events):
        took = ""
        if event.to_status == job_pb2.JOB_STATUS_RUNNING:
            if i + 1 < len(events):
                took = between(event.at, events[i + 1].at)
            elif job.status == job_pb2.JOB_STATUS_RUNNING:
                took = "running"
        rows.append(Step(event, took))
    return rows
