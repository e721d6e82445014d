"""Conversions between protobuf well-known types and Python values."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2


def struct_from_dict(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def dict_from_struct(message: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as plain JSON values. Struct numbers are doubles: whole numbers come back
    as ints so that pydantic int fields accept them."""
    converted: dict[str, Any] = _ints(json_format.MessageToDict(message))
    return converted


def _ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message
