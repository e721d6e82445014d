"""A fake of the outbox dispatcher as other use cases see it (``Waker`` and ``Handoff``)."""

from __future__ import annotations

from collections.abc import Sequence

from job_service.domain.outbox import OutboxMessage


class FakeDispatcher:
    """``Waker`` and ``Handoff``: records each wake (its ``after_s``) and every message
    handed over."""

    def __init__(self, owner: str = "replica-1") -> None:
        self._owner = owner
        self.wakes: list[float] = []
        self.handed: list[OutboxMessage] = []

    @property
    def owner(self) -> str:
        return self._owner

    def wake(self, after_s: float = 0.0) -> None:
        self.wakes.append(after_s)

    def hand_over(self, messages: Sequence[OutboxMessage]) -> None:
        self.handed += messages
