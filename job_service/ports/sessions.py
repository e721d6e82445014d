"""What the worker sessions use case needs: the session registry shared by every replica."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from job_service.ports.leases import AttemptEnding


class SessionStore(Protocol):
    async def open(self, worker_id: str, instance_id: str) -> int:
        """A new session of the worker on this replica (replacing its open ones); its id."""
        ...

    async def close(self, session_id: int, *, goodbye: bool) -> None: ...

    def ending_leases(
        self, worker_id: str, session_id: int
    ) -> AbstractAsyncContextManager[AttemptEnding | None]:
        """A transaction under the worker's session lock in which its attempts end (no new
        session can register meanwhile), or None when it opened a session after
        ``session_id`` (it is alive: nothing may change)."""
        ...
