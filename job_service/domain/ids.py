"""Job ids: UUIDs of version 7 (RFC 9562), the creation time in milliseconds first, then
random bits, as the database's ``job_id_v7()`` default makes them (migration 0016). Ids
made close in time sort close together, so the indexes keyed by job id grow at their right
edge instead of at random pages. Pure: no I/O but the clock and the random source."""

from __future__ import annotations

import secrets
import time
import uuid

_MS_BITS = 48
_VERSION = 0x7
_VARIANT = 0b10


def new_job_id(now_ns: int | None = None) -> str:
    """A fresh version-7 UUID, as text; ``now_ns`` (Unix time, ns) for tests."""
    ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    rand_a = secrets.randbits(12)
    rand_b = secrets.randbits(62)
    value = (
        (ms & ((1 << _MS_BITS) - 1)) << 80 | _VERSION << 76 | rand_a << 64 | _VARIANT << 62 | rand_b
    )
    return str(uuid.UUID(int=value))
