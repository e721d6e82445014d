"""What EraseUserData needs from storage: to count a user's data, and to delete it (jobs
in bounded batches, then their schedules and stored provider keys). The user's data key
goes through ``ports.data_keys`` (the Sealer)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol


@dataclass(frozen=True)
class UserData:
    """A user's rows, counted (what an erase deletes, or deleted)."""

    jobs: int = 0
    artifacts: int = 0
    steps: int = 0
    signals: int = 0
    events: int = 0
    usage_records: int = 0
    schedules: int = 0
    credentials: int = 0

    def __add__(self, other: UserData) -> UserData:
        return UserData(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )


class ErasureStore(Protocol):
    async def count(self, user_id: str) -> UserData:
        """Everything of the user's an erase would delete (unfinished jobs included)."""
        ...

    async def unfinished(self, user_id: str) -> int:
        """The user's jobs that have not ended (an erase refuses while there are any)."""
        ...

    async def erase_jobs(self, user_id: str, limit: int) -> UserData:
        """Deletes up to ``limit`` of the user's finished jobs with every row of theirs
        (their per-call usage folded into the daily counters first); what went."""
        ...

    async def erase_rest(self, user_id: str) -> UserData:
        """Deletes the user's schedules and stored provider keys; what went."""
        ...
