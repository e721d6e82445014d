"""The shapes every view is made of: aligned tables, times, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp


def as_dict(message: Message) -> dict[str, Any]:
    """The message as the JSON scripts get: proto field names, enums by name."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def as_json(value: Any) -> str:
    if isinstance(value, Message):
        value = as_dict(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return "-"
    moment = datetime.fromtimestamp(stamp.seconds + stamp.nanos / 1e9, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def enum_name(enum: Any, value: int, prefix: str) -> str:
    """``OVERLAP_POLICY_CANCEL_PREVIOUS`` -> ``cancel-previous``; 0 (unset) -> ``default``."""
    if not value:
        return "default"
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower().replace("_", "-")
    except ValueError:
        return str(value)
