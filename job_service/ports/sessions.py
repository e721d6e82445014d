"""What the worker sessions use case needs: the session registry shared by every replica."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from job_service.ports.leases import AttemptEnding


@dataclass(frozen=True)
class Registration:
    """A new session, registered in an open transaction under the worker's session lock:
    ``ending`` ends attempts in that same transaction."""

    session_id: int
    # the process of the worker's previous session (None: none known, or an older worker
    # that named none)
    previous_incarnation: str | None
    ending: AttemptEnding


class SessionStore(Protocol):
    def open(
        self, worker_id: str, instance_id: str, incarnation: str
    ) -> AbstractAsyncContextManager[Registration]:
        """A new session of the worker on this replica (replacing its open ones),
        committed when the block ends; ``incarnation`` empty for an older worker."""
        ...

    async def close(self, session_id: int, *, goodbye: bool) -> None: ...

    def ending_leases(
        self, worker_id: str, session_id: int
    ) -> AbstractAsyncContextManager[AttemptEnding | None]:
        """A transaction under the worker's session lock in which its attempts end (no new
        session can register meanwhile), or None when it opened a session after
        ``session_id`` (it is alive: nothing may change)."""
        ...
