"""What the signals use cases (send a signal, hand a worker its job's signals) need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from job_service.domain.signals import JobSignal, SentSignal


class SignalStore(Protocol):
    async def send(
        self,
        job_id: str,
        user_id: str,
        name: str,
        payload: dict[str, Any],
        key: str | None,
        limit: int,
    ) -> SentSignal | None:
        """Stores the signal with the job's next seq, in one transaction, unless ``key``
        names one stored before (that one is answered, ``created`` False). None: the user
        has no such job. Raises ``JobFinished`` for a finished job, ``SignalLimitReached``
        when the job already holds ``limit`` signals (checked in the storing statement, so
        concurrent sends never pass it) and ``IdempotencyKeyReused`` for a key stored with
        another name or payload."""
        ...

    async def fetch(
        self, job_id: str, lease_token: str, after_seq: int, limit: int
    ) -> tuple[Sequence[JobSignal], bool] | None:
        """The job's signals after ``after_seq`` in seq order (at most ``limit``) and
        whether there are more, for the holder of its current lease; None otherwise."""
        ...


class SignalNotifier(Protocol):
    """Tells the worker running a job that it has signals up to ``seq`` (best effort: the
    heartbeat carries the latest seq too)."""

    async def notify_signal(self, job_id: str, seq: int) -> None: ...
