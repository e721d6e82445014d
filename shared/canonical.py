"""Canonical JSON: one byte form per value, so equal content hashes equally.

Numbers are normalised first: a whole float is written as an int. JSON (and protobuf's
Struct, whose numbers are all doubles) cannot tell 2 from 2.0, so neither may the hash.

Only values PostgreSQL's ``jsonb`` can store are canonical: NaN, infinities and strings
holding a NUL character raise ValueError (a Struct carries all three; jsonb refuses them,
and one such value in a batch statement would fail the whole batch).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any


def _normalise(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("NaN and infinities are not JSON")
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("a NUL character cannot be stored")
        return value
    if isinstance(value, dict):
        return {_normalise(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return value


def check_storable(value: Any) -> None:
    """ValueError unless ``value`` can be stored as jsonb."""
    _normalise(value)


def canonical_json(value: Any) -> str:
    return json.dumps(_normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(value: Any) -> str:
    """sha256 (hex) of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
