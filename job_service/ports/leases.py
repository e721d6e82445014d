"""What the leases use cases (heartbeat, failed attempts, the reaper) need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.models import (
    AttemptFacts,
    FailureOutcome,
    HeartbeatAck,
)
from job_service.domain.retry import RetryDecision
from shared.ai.provider import UsageRecord


class Decide(Protocol):
    """The retry decision for a failed attempt of a RUNNING job."""

    def __call__(self, facts: AttemptFacts, code: str) -> RetryDecision: ...


class LeaseStore(Protocol):
    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck:
        """The extended lease, or LeaseLost."""
        ...

    async def end_attempt(
        self,
        job_id: str,
        lease_token: str,
        code: str,
        message: str,
        decide: Decide,
        usage: Sequence[UsageRecord] = (),
    ) -> FailureOutcome:
        """The attempt ended as ``decide`` says (a pending cancel wins), or LeaseLost."""
        ...

    async def reap_expired_leases(self, limit: int, decide: Decide) -> list[FailureOutcome]: ...

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord]
    ) -> tuple[int, int]:
        """(attempt number, rows stored) for calls of the attempt the token names, current
        or ended; LeaseLost when it names none."""
        ...
