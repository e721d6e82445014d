"""Queues as operators see them: their state (paused, counts, limit) and their concurrency
limits (JOBS_QUEUE_CONCURRENCY)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class QueueState:
    name: str
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    waiting: int
    eligible: int
    running: int
    concurrency_limit: int


def parse_limits(text: str) -> dict[str, int]:
    """``queue=limit`` pairs, comma-separated (JOBS_QUEUE_CONCURRENCY)."""
    limits: dict[str, int] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"expected queue=limit with a limit of at least 1, got {pair!r}")
        limits[name.strip()] = int(value)
    return limits
