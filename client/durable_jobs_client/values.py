"""Job inputs and outputs as plain Python values, numbers as their JSON said.

A job's input, output and artifact payloads travel as ``google.protobuf.Struct``, which
holds every number as a double: an output's ``"score": 29`` arrives as ``29.0``. The rule
(docs/api.md, "Numbers in inputs and outputs"): a number with no fractional part whose
magnitude is at most 2**53 (where a double still counts every integer exactly) is an
integer; any other number is a float. Every page and command of this project shows values through
``plain``, so ``29`` reads ``29`` wherever it is shown, and ``29.5`` stays ``29.5``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

# Beyond this a double no longer counts every integer: such a number stays a float.
_EXACT = 2**53


def plain(value: Any) -> Any:
    """``value`` with every whole-numbered float (|x| <= 2**53) turned into an int; dicts
    and lists are copied, anything else is returned as it is."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= _EXACT else value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def to_python(message: Message, **options: Any) -> Any:
    """A message (a Struct, a Job, any answer) as JSON-ready Python values, through
    ``json_format.MessageToDict`` (``options`` are its keyword arguments), with numbers as
    ``plain`` makes them."""
    return plain(json_format.MessageToDict(message, **options))
