"""Canonical JSON: one byte form per value, so equal content hashes equally.

Numbers are normalised first: a whole float is written as an int. JSON (and protobuf's
Struct, whose numbers are all doubles) cannot tell 2 from 2.0, so neither may the hash.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _normalise(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """ValueError for NaN and infinities: they are not JSON, and PostgreSQL's jsonb refuses
    them too."""
    return json.dumps(
        _normalise(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def content_hash(value: Any) -> str:
    """sha256 (hex) of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
