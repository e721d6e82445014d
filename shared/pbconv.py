"""Conversions between protobuf well-known types and Python values."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2


def struct_from_dict(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def dict_from_struct(message: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as plain Python values. Struct numbers are doubles: whole numbers come back
    as ints so that pydantic int fields accept them. NaN and infinities come back as such
    (a Struct can hold them; JSON cannot): whoever needs JSON refuses them by name."""
    return {key: _value(value) for key, value in message.fields.items()}


def _value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "struct_value":
        return dict_from_struct(value.struct_value)
    if kind == "list_value":
        return [_value(item) for item in value.list_value.values]
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or a Value with nothing set


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message
