"""What the signals use cases (send a signal, hand a worker its job's signals) need."""

from __future__ import annotations

from typing import Any, Protocol

from job_service.domain.signals import FetchedSignals, SentSignal, StoredSignal


class SignalStore(Protocol):
    async def send(
        self,
        job_id: str,
        user_id: str,
        name: str,
        payload: Any,
        key: str | None,
        limit: int,
    ) -> SentSignal | StoredSignal | None:
        """Stores the signal (``payload`` as its column stores it) with the job's next seq,
        in one transaction, unless ``key`` names one stored before: that one is answered as
        stored (a StoredSignal, for the caller to judge whether it is the same). None: the
        user has no such job. Raises ``JobFinished`` for a finished job and
        ``SignalLimitReached`` when the job already holds ``limit`` signals (checked in the
        storing statement, so concurrent sends never pass it)."""
        ...

    async def fetch(
        self, job_id: str, lease_token: str, after_seq: int, limit: int
    ) -> FetchedSignals | None:
        """The job's signals after ``after_seq`` in seq order (at most ``limit``), whether
        there are more, and the job's owner, for the holder of its current lease; None
        otherwise."""
        ...


class SignalNotifier(Protocol):
    """Tells the worker running a job that it has signals up to ``seq`` (best effort: the
    heartbeat carries the latest seq too)."""

    async def notify_signal(self, job_id: str, seq: int) -> None: ...
