"""A tier's rate bucket in SQL (``rate_limits``: requests and tokens, the back-off factor,
``refilled_at``), the rendering of the pure ``job_service.domain.rate_limits`` functions of
the same names: the claim's spend (``claims.RESERVE``), a call's slot and a 429's block
(``call_permits.TAKE``, ``THROTTLE``), and the time ``rate_limits.STATES`` reads back.

Each piece takes SQL expressions. The clock is the caller's, on purpose: a statement that
spends under the row lock reads ``clock_timestamp()`` once the lock is its own, others read
``now()`` (the statement's start); ``elapsed`` names it at every use.
"""

from __future__ import annotations


def elapsed(refilled_at: str, clock: str) -> str:
    """Seconds since ``refilled_at`` by ``clock``, never negative (a 429's block sets
    ``refilled_at`` at its end: no refill and no recovery before it)."""
    return f"greatest(extract(epoch FROM {clock} - {refilled_at})::float8, 0)"


def recovered(factor: str, elapsed_s: str, recovery_s: str) -> str:
    """The factor recovered additively over ``elapsed_s``, at most 1."""
    return f"least(1.0, {factor} + {elapsed_s} / {recovery_s})"


def backed_off(factor: str, floor: str) -> str:
    """The factor halved by a 429, never below ``floor``."""
    return f"greatest({floor}, {factor} / 2)"


def refilled(level: str, elapsed_s: str, *, per_minute: str, capacity: str, factor: str) -> str:
    """A meter ``level`` refilled over ``elapsed_s`` at ``per_minute`` times ``factor`` (the
    factor before recovery), at most ``capacity``."""
    return f"least({capacity}, {level} + {elapsed_s} * {per_minute} / 60 * {factor})"
