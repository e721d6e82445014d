"""What the leases use cases (heartbeat, ending attempts, the reaper, late usage) need."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from job_service.domain.attempts import (
    AttemptEnd,
    EndedAttempt,
    HeartbeatAck,
    LeaseState,
    LockedAttempt,
)
from shared.ai.provider import UsageRecord


class AttemptEnding(Protocol):
    """One transaction that ends attempts: it locks their rows, then writes each end as the
    use case decided it. Committed when the block ends without an error."""

    async def attempt(self, job_id: str, lease_token: str) -> LockedAttempt | None:
        """The attempt ``lease_token`` names, locked, while its job is leased; else None."""
        ...

    async def expired(self, limit: int) -> list[LockedAttempt]:
        """Up to ``limit`` attempts whose lease ran out (the database clock decides),
        locked; rows another transaction holds are skipped (safe across replicas)."""
        ...

    async def of_worker(self, worker_id: str, limit: int) -> list[LockedAttempt]:
        """Up to ``limit`` attempts ``worker_id`` holds, locked (rows held elsewhere
        skipped)."""
        ...

    async def lease_state(self, job_id: str) -> LeaseState | None: ...

    async def store_usage(self, attempt: LockedAttempt, usage: Sequence[UsageRecord]) -> None:
        """The attempt's provider calls (``usage`` not empty), and its last call's provider
        and model on the job."""
        ...

    async def end(
        self, attempt: LockedAttempt, end: AttemptEnd, message: str, *, reaped: bool = False
    ) -> EndedAttempt:
        """Writes ``end`` (with its timeline event, and a retry's dispatch row or a final
        status's domain event). ``reaped``: abandoned (its lease ran out, or its worker
        disconnected), so an AI job's attempt is marked as having unknown usage."""
        ...


class LeaseStore(Protocol):
    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck:
        """The extended lease, or LeaseLost."""
        ...

    def ending(self) -> AbstractAsyncContextManager[AttemptEnding]: ...

    async def lease_state(self, job_id: str) -> LeaseState | None: ...

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord]
    ) -> tuple[int, int]:
        """(attempt number, rows stored) for calls of the attempt the token names, current
        or ended; LeaseLost when it names none."""
        ...
