"""Where users' data keys are kept (wrapped; ``job_service.ports.key_encryption`` wraps
them): found, added once, re-wrapped by a rotation, destroyed by an erase."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.ports.key_encryption import WrappedKey


class DataKeyStore(Protocol):
    async def find(self, user_id: str) -> WrappedKey | None:
        """The user's wrapped data key; None when the user has none (yet, or erased)."""
        ...

    async def add(self, user_id: str, wrapped: WrappedKey) -> WrappedKey:
        """Stores ``wrapped`` as the user's key unless they have one; returns the key
        stored (another replica's, when it added one first)."""
        ...

    async def destroy(self, user_id: str) -> bool:
        """Deletes the user's key (crypto-shredding); whether there was one."""
        ...

    async def wrapped_elsewhere(self, kek_id: str, limit: int) -> Sequence[tuple[str, WrappedKey]]:
        """Up to ``limit`` (user, key) pairs wrapped under a KEK other than ``kek_id``."""
        ...

    async def count_wrapped_elsewhere(self, kek_id: str) -> int:
        """How many keys are wrapped under a KEK other than ``kek_id`` (left to re-wrap)."""
        ...

    async def rewrap(self, user_id: str, old: WrappedKey, new: WrappedKey) -> bool:
        """Replaces the user's key ``old`` with ``new`` (the same key wrapped again);
        False when it is no longer ``old`` (erased, or re-wrapped by another replica)."""
        ...
