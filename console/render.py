"""Turning protobuf messages into what the templates show; the Jinja environment.

Autoescaping is on for every template: job output, artifacts and error text are data from
users and models, never markup.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from jinja2 import Environment, FileSystemLoader, select_autoescape

from shared.pb.jobs.v1 import job_pb2

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
PREFIX = "JOB_STATUS_"
TERMINAL = {job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED}
# What RetryJob accepts.
RETRYABLE = {job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED}


def status_label(status: int) -> str:
    """``JOB_STATUS_CANCEL_REQUESTED`` -> ``cancel_requested``."""
    return job_pb2.JobStatus.Name(status).removeprefix(PREFIX).lower()


def status_value(label: str) -> int:
    """The inverse of ``status_label``; 0 (no filter) for an empty or unknown label."""
    try:
        return int(job_pb2.JobStatus.Value(PREFIX + label.upper()))
    except ValueError:
        return 0


STATUS_LABELS = [status_label(v) for v in job_pb2.JobStatus.values() if v]


def when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return ""
    at = stamp.ToDatetime(tzinfo=UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def ahead(stamp: Timestamp) -> str:
    """``when``, for a time still to come; "" once it has passed (or when unset)."""
    if not stamp.seconds and not stamp.nanos:
        return ""
    return when(stamp) if stamp.ToDatetime(tzinfo=UTC) > datetime.now(UTC) else ""


def as_json(message: Message | None) -> str:
    if message is None:
        return ""
    return json.dumps(MessageToDict(message), indent=2, sort_keys=True)


def plain_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)


def schema(text: str) -> str:
    try:
        return plain_json(json.loads(text))
    except ValueError:
        return text


def hold_label(reason: int) -> str:
    """``REASON_QUEUE_PAUSED`` -> ``queue paused``."""
    try:
        name = str(job_pb2.JobHold.Reason.Name(reason))
    except ValueError:
        return str(reason)
    return name.removeprefix("REASON_").lower().replace("_", " ")


def has_hold(job: job_pb2.Job) -> bool:
    """A waiting job's hold (AdminService.GetJob answers only)."""
    return job.HasField("hold") and job.hold.reason != job_pb2.JobHold.REASON_UNSPECIFIED


def is_terminal(job: job_pb2.Job) -> bool:
    return job.status in TERMINAL


def ago(at: datetime) -> str:
    return at.strftime("%H:%M:%SZ")


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        status=status_label,
        when=when,
        as_json=as_json,
        schema=schema,
        clock=ago,
        hold=hold_label,
        ahead=ahead,
    )
    env.globals.update(
        is_terminal=is_terminal,
        has_hold=has_hold,
        RETRYABLE=RETRYABLE,
        STATUS_LABELS=STATUS_LABELS,
    )
    return env
