"""Turning protobuf messages into what the templates show; the Jinja environment.

Autoescaping is on for every template: job output, artifacts and error text are data from
users and models, never markup. Status and hold names, and which statuses are terminal or
retryable, are the client library's (``durable_jobs_client.statuses``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import (
    RETRYABLE,
    STATUS_NAMES,
    has_hold,
    hold_name,
    is_terminal,
    status_name,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from jinja2 import Environment, FileSystemLoader, select_autoescape

from console.ids import short_id

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


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
    return at.strftime("%H:%M:%SZ")


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
        hold=hold_label,
        ahead=ahead,
        policy=policy_label,
        short_id=short_id,
    )
    env.globals.update(
        is_terminal=is_terminal,
        has_hold=has_hold,
        RETRYABLE=RETRYABLE,
        STATUS_LABELS=list(STATUS_NAMES),
    )
    return env
