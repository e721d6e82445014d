"""Signals as the job's owner, its code and SendSignal's answer see them. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from job_service.domain.lifecycle import JobStatus


@dataclass(frozen=True)
class ReceivedSignal:
    """A signal as the job's owner sees it: no payload."""

    seq: int
    name: str
    sent_at: datetime


@dataclass(frozen=True)
class JobSignal:
    """A signal as the job's code receives it."""

    seq: int
    name: str
    payload: dict[str, Any]
    sent_at: datetime


@dataclass(frozen=True)
class SentSignal:
    """SendSignal's answer: the stored signal, whether this call stored it, and the job's
    type and status then (to count it and to notify a running job's worker)."""

    signal: ReceivedSignal
    created: bool
    job_type: str
    status: JobStatus | None
    # the send woke the job from a signal wait (ctx.wait_for_signal): it is due now
    woke: bool = False


@dataclass(frozen=True)
class StoredSignal:
    """A signal stored before under an idempotency key: its name and payload as stored
    (sealed or not), for SendSignal to judge whether a repeat is the same signal."""

    sent: SentSignal
    name: str
    payload: Any


@dataclass(frozen=True)
class FetchedSignals:
    """A page of a job's signals as stored (payloads sealed or not) and the job's owner,
    whose key opens them."""

    user_id: str
    signals: list[JobSignal]
    more: bool
