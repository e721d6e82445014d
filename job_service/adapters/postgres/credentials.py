"""Users' sealed provider keys on PostgreSQL (the ``credentials`` table).

Only sealed keys pass through here: the plaintext is sealed before ``insert`` and opened
after ``for_attempt``, both in ``job_service.usecases.credentials``.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from job_service.domain.credentials import (
    AttemptCredential,
    CredentialRecord,
    NewCredential,
    Sealed,
)
from shared.credentials import CredentialMode

_RECORD = "id::text AS id, user_id, provider, label, fingerprint, created_at, last_used_at"

# A key stored under an idempotency key already is not stored again (no row returned).
INSERT = f"""
INSERT INTO credentials (id, user_id, provider, label, fingerprint, key_id, nonce, ciphertext,
                         idempotency_key, request_hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING {_RECORD}
"""

# What an idempotency key stored, with the hash of the request that stored it.
BY_KEY = f"""
SELECT {_RECORD}, request_hash FROM credentials WHERE user_id = $1 AND idempotency_key = $2
"""

LIST = f"""
SELECT {_RECORD} FROM credentials WHERE user_id = $1 ORDER BY created_at DESC, id
"""

DELETE = "DELETE FROM credentials WHERE id = $1 AND user_id = $2 RETURNING id"

OWNED = "SELECT EXISTS (SELECT 1 FROM credentials WHERE id = $1 AND user_id = $2)"

# The job's credential, for the holder of its current, unexpired lease only; marks the key
# used. No row: the lease is not held. A row without `id`: the job runs on the platform key,
# or its key was deleted.
FOR_ATTEMPT = """
WITH job AS (
    SELECT j.user_id, j.credential_mode, j.credential_id FROM jobs j
    WHERE j.id = $1 AND j.lease_token = $2 AND j.status = ANY($3::text[])
      AND j.lock_until > now()
), used AS (
    UPDATE credentials c SET last_used_at = now()
    FROM job WHERE c.id = job.credential_id AND c.user_id = job.user_id
    RETURNING c.id::text AS id, c.user_id, c.provider, c.key_id, c.nonce, c.ciphertext
)
SELECT job.credential_mode, job.credential_id::text AS credential_id, job.user_id,
       used.id AS found_id, used.provider, used.key_id, used.nonce, used.ciphertext
FROM job LEFT JOIN used ON true
"""

KEY_IDS = "SELECT DISTINCT key_id FROM credentials"

NOT_UNDER = """
SELECT id::text AS id, user_id, provider, key_id, nonce, ciphertext FROM credentials
WHERE key_id <> $1 ORDER BY id LIMIT $2
"""

# Compare-and-set on the old key id: a concurrent rotation or delete wins.
RESEAL = """
UPDATE credentials SET key_id = $3, nonce = $4, ciphertext = $5, updated_at = now()
WHERE id = $1 AND key_id = $2
"""


class CredentialRepository:
    """The ``CredentialStore`` port on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def insert(self, new: NewCredential) -> tuple[CredentialRecord, str | None]:
        """The credential stored, and None; or, when its idempotency key stored one
        already, that one and the hash of the request that stored it."""
        while True:
            row = await self._pool.fetchrow(
                INSERT,
                new.id,
                new.user_id,
                new.provider,
                new.label,
                new.fingerprint,
                new.sealed.key_id,
                new.sealed.nonce,
                new.sealed.ciphertext,
                new.idempotency_key,
                new.request_hash or None,
            )
            if row is not None:
                return _record(row), None
            found = await self._pool.fetchrow(BY_KEY, new.user_id, new.idempotency_key)
            if found is not None:
                return _record(found), found["request_hash"] or ""
            # deleted between the two statements: the key is free again

    async def for_user(self, user_id: str) -> list[CredentialRecord]:
        return [_record(row) for row in await self._pool.fetch(LIST, user_id)]

    async def delete(self, credential_id: str, user_id: str) -> bool:
        return await self._pool.fetchval(DELETE, credential_id, user_id) is not None

    async def owned(self, credential_id: str, user_id: str) -> bool:
        return bool(await self._pool.fetchval(OWNED, credential_id, user_id))

    async def for_attempt(
        self, job_id: str, lease_token: str, statuses: Sequence[str]
    ) -> AttemptCredential | None:
        row = await self._pool.fetchrow(FOR_ATTEMPT, job_id, lease_token, list(statuses))
        if row is None:
            return None
        sealed = (
            Sealed(row["key_id"], row["nonce"], row["ciphertext"])
            if row["found_id"] is not None
            else None
        )
        return AttemptCredential(
            mode=CredentialMode(row["credential_mode"]),
            credential_id=row["credential_id"],
            user_id=row["user_id"],
            provider=row["provider"],
            sealed=sealed,
        )

    async def key_ids(self) -> set[str]:
        return {row["key_id"] for row in await self._pool.fetch(KEY_IDS)}

    async def not_sealed_under(self, key_id: str, limit: int) -> list[tuple[str, str, str, Sealed]]:
        """(id, user id, provider, sealed) of keys sealed under another master key."""
        rows = await self._pool.fetch(NOT_UNDER, key_id, limit)
        return [
            (r["id"], r["user_id"], r["provider"], Sealed(r["key_id"], r["nonce"], r["ciphertext"]))
            for r in rows
        ]

    async def reseal(self, credential_id: str, old_key_id: str, sealed: Sealed) -> bool:
        status = await self._pool.execute(
            RESEAL, credential_id, old_key_id, sealed.key_id, sealed.nonce, sealed.ciphertext
        )
        return status.endswith(" 1")


def _record(row: asyncpg.Record) -> CredentialRecord:
    return CredentialRecord(
        id=row["id"],
        user_id=row["user_id"],
        provider=row["provider"],
        label=row["label"],
        fingerprint=row["fingerprint"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
    )
