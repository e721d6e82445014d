"""What the outbox use cases (dispatcher, reconciler, dead letters) need, and the hint
other use cases give the dispatcher."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.outbox import DeadEvent, OutboxMessage


class OutboxStore(Protocol):
    async def claim(self, owner: str, limit: int, claim_ttl_s: float) -> list[OutboxMessage]: ...

    async def mark_published(self, owner: str, ids: Sequence[int]) -> None: ...

    async def mark_failed(
        self, owner: str, failures: Sequence[tuple[int, str]], max_attempts: int
    ) -> None: ...

    async def release(self, owner: str, ids: Sequence[int], delay_s: float) -> None: ...

    async def prune(self, retention_s: float, limit: int) -> int: ...

    async def redispatch_stranded(self, after_s: float, limit: int) -> int: ...

    async def dead_events(self, before_id: int | None, limit: int) -> list[DeadEvent]: ...

    async def redrive(self, event_ids: Sequence[int] | None) -> int: ...


class BatchPublisher(Protocol):
    @property
    def connected(self) -> bool: ...

    async def publish_batch(self, messages: Sequence[OutboxMessage]) -> list[str | None]:
        """Per message, None when JetStream acknowledged it, else why not."""
        ...


class Waker(Protocol):
    """Tells the outbox dispatcher that rows are (or will be, after ``after_s``) due."""

    def wake(self, after_s: float = 0.0) -> None: ...


class Handoff(Protocol):
    """The dispatcher of this replica, as the statements that write outbox rows see it: they
    write the rows due at once already claimed by ``owner`` and, once those have committed,
    hand them over to be published without a claim statement."""

    @property
    def owner(self) -> str: ...

    def hand_over(self, messages: Sequence[OutboxMessage]) -> None: ...


class GrantPush(Protocol):
    """Grants jobs to waiting workers for the dispatch messages among ``messages``, claimed
    by the dispatcher ``owner``; the ids of the messages those grants used, marked published
    by the grants' own statements (``usecases.grants``)."""

    async def __call__(self, messages: Sequence[OutboxMessage], owner: str) -> set[int]: ...
