"""What the console sessions use case needs: the session rows every replica shares."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol


class ConsoleSessionStore(Protocol):
    async def open(
        self, secret_hash: str, principal: str, idle: timedelta, max_age: timedelta
    ) -> datetime:
        """Stores a new session (and deletes a batch of long-ended ones); its expiry."""
        ...

    async def touch(self, secret_hash: str, principal: str) -> datetime | None:
        """Marks a live session of ``principal`` seen now; its expiry, or None when there is
        no such live session (closed, idle too long, expired, another principal's)."""
        ...

    async def close(self, secret_hash: str, principal: str) -> None: ...

    async def revoke(self, principal: str) -> int:
        """Closes every live session of ``principal``; how many."""
        ...
