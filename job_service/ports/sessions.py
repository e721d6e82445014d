"""What the worker sessions use case needs: the session registry shared by every replica."""

from __future__ import annotations

from typing import Protocol

from job_service.domain.models import FailureOutcome
from job_service.ports.leases import Decide


class SessionStore(Protocol):
    async def open(self, worker_id: str, instance_id: str) -> int:
        """A new session of the worker on this replica (replacing its open ones); its id."""
        ...

    async def close(self, session_id: int, *, goodbye: bool) -> None: ...

    async def end_leases_unless_back(
        self, worker_id: str, session_id: int, decide: Decide
    ) -> list[FailureOutcome] | None:
        """The worker's leases ended as WORKER_DISCONNECTED, or None when it opened a
        session after ``session_id`` (it is alive; nothing changed)."""
        ...
