"""What the credentials use cases need: users' sealed provider keys, never the plaintext."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.credentials import (
    AttemptCredential,
    CredentialRecord,
    NewCredential,
    Sealed,
)


class CredentialStore(Protocol):
    async def insert(self, new: NewCredential) -> tuple[CredentialRecord, str | None]:
        """The credential stored and None; or, when ``new.idempotency_key`` stored one
        already, that one and the hash of the request that stored it."""
        ...

    async def for_user(self, user_id: str) -> list[CredentialRecord]: ...

    async def delete(self, credential_id: str, user_id: str) -> bool: ...

    async def owned(self, credential_id: str, user_id: str) -> bool: ...

    async def for_attempt(
        self, job_id: str, lease_token: str, statuses: Sequence[str]
    ) -> AttemptCredential | None:
        """The job's credential if ``lease_token`` is its current, unexpired lease and its
        status is one of ``statuses``; None otherwise. Marks a user's key as used."""
        ...

    async def key_ids(self) -> set[str]: ...

    async def not_sealed_under(
        self, key_id: str, limit: int
    ) -> list[tuple[str, str, str, Sealed]]: ...

    async def reseal(self, credential_id: str, old_key_id: str, sealed: Sealed) -> bool: ...
