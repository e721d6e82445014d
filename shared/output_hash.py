"""``output_hash``: the hash a worker sends with a result and the job service checks and
stores, in a form any language can reproduce.

The scheme is written with the hash: ``jcs:sha256:<hex>`` is the sha256 (lower-case hex)
of the output's RFC 8785 canonical JSON (JSON Canonicalization Scheme: keys sorted by
UTF-16 code units, numbers as ECMAScript prints doubles, minimal string escapes, UTF-8),
which libraries in most languages produce. Every number is a double, as in protobuf's
Struct that carries the output: an integer is hashed as the double it travels as.

A bare 64-digit hex hash is the legacy scheme (``shared.canonical.content_hash``:
Python's json.dumps with sorted keys), what workers sent before; the job service still
accepts it, so a worker fleet can be upgraded one worker at a time, and jobs stored with it
keep their hash.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import rfc8785

from shared.canonical import content_hash

JCS_SHA256 = "jcs:sha256:"
_HEX = re.compile(r"[0-9a-f]{64}")


def _doubles(value: Any) -> Any:
    """``value`` with every integer as the double JSON (and Struct) carries it as."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: _doubles(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_doubles(v) for v in value]
    return value


def jcs(value: Any) -> bytes:
    """The RFC 8785 canonical JSON of ``value`` (ValueError for NaN or infinities)."""
    try:
        return rfc8785.dumps(_doubles(value))
    except rfc8785.CanonicalizationError as error:
        raise ValueError(str(error)) from None


def output_hash(value: Any) -> str:
    """The hash a worker sends: ``jcs:sha256:`` and the sha256 of the RFC 8785 JSON."""
    return JCS_SHA256 + hashlib.sha256(jcs(value)).hexdigest()


def matches(declared: str, value: Any) -> bool:
    """Whether ``declared`` is the hash of ``value`` under the scheme it names (JCS, or
    the legacy bare hex). ValueError when ``value`` is not JSON."""
    if declared.startswith(JCS_SHA256):
        return declared == output_hash(value)
    if _HEX.fullmatch(declared):
        return declared == content_hash(value)
    return False
