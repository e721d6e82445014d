"""The outbox's vocabulary: the status of a row and the message a claim hands out.

Pure: no I/O. The postgres outbox adapter spells these statuses in its SQL from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class OutboxStatus(StrEnum):
    PENDING = "pending"  # committed, waiting to be claimed (from available_at on)
    PROCESSING = "processing"  # claimed by one dispatcher (taken over when stale)
    PUBLISHED = "published"  # acknowledged by JetStream; pruned after the retention
    DEAD = "dead"  # out of attempts while NATS was reachable; redriven by an operator


# Rows not yet published: the backlog the metrics report.
UNPUBLISHED = (OutboxStatus.PENDING, OutboxStatus.PROCESSING, OutboxStatus.DEAD)


@dataclass(frozen=True)
class OutboxMessage:
    id: int
    subject: str
    dedupe_key: str
    payload: dict[str, Any]
    attempt_count: int
    # How long the row had been due when claimed (for the publish-lag histogram).
    due_for_s: float = 0.0


@dataclass(frozen=True)
class DispatchMark:
    """Dispatch rows a pushed grant uses, marked published by the grant's own statement:
    the first as many of ``ids`` (claimed by ``owner``, in order) as the statement grants
    jobs. Grant and mark commit together, so no crash leaves a job granted whose token is
    still to be published."""

    owner: str
    ids: tuple[int, ...]


@dataclass(frozen=True)
class DeadEvent:
    """An outbox row that failed to publish too many times."""

    id: int
    job_id: str
    subject: str
    attempts: int
    last_error: str | None
    created_at: datetime
