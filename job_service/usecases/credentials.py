"""The use cases of users' own provider keys: CredentialService (put, list, delete), the
worker's ResolveCredential, and the start-up and rotation checks of the master keys.

The plaintext key exists here only between the request that carries it and ``seal``, and
between ``open`` and the response to the worker holding the job's lease. No message built
here contains it; errors name fields and ids, never values.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import uuid

from job_service.domain.checks import require_name, require_uuid
from job_service.domain.credentials import (
    CredentialRecord,
    Keyring,
    NewCredential,
    ResolvedKey,
    SealBroken,
    binding,
)
from job_service.domain.lifecycle import LEASED, status_values
from job_service.ports.credentials import CredentialStore
from shared.credentials import MAX_API_KEY_CHARS, PROVIDER_PATTERN, CredentialMode, fingerprint
from shared.errors import (
    CredentialNotFound,
    CredentialUnavailable,
    FieldViolation,
    IdempotencyKeyReused,
    InvalidInput,
    LeaseLost,
)

log = logging.getLogger(__name__)

MAX_LABEL_CHARS = 200
RESEAL_BATCH = 100


def _request_hash(provider: str, label: str, api_key: str) -> str:
    """What PutCredential asked for, as a hash kept with an idempotency key: the key only
    through its own sha256, so nothing stored opens it."""
    key_digest = hashlib.sha256(api_key.encode()).hexdigest()
    return hashlib.sha256(f"{provider}\n{label}\n{key_digest}".encode()).hexdigest()


class MasterKeyMissing(RuntimeError):
    """Stored keys cannot be opened with the configured master keys: refuse to start."""


class CredentialVault:
    """Seals keys on the way in and opens them for the holder of a job's lease only."""

    def __init__(self, store: CredentialStore, keyring: Keyring | None) -> None:
        self._store = store
        self._keyring = keyring

    # --- CredentialService -------------------------------------------------------------

    async def put(
        self, user_id: str, provider: str, api_key: str, label: str, idempotency_key: str = ""
    ) -> CredentialRecord:
        """Stores the key; with ``idempotency_key``, once: the same key and request answer
        the credential stored (while it exists), another request IDEMPOTENCY_KEY_REUSED."""
        require_name("user_id", user_id)
        if idempotency_key:
            require_name("idempotency_key", idempotency_key)
        _check_provider(provider)
        _check_api_key(api_key)
        if len(label) > MAX_LABEL_CHARS or not label.isprintable():
            raise InvalidInput(
                "label is too long or not printable",
                [FieldViolation("label", f"at most {MAX_LABEL_CHARS} printable characters")],
            )
        keyring = self._require_keyring()
        credential_id = str(uuid.uuid4())
        asked = _request_hash(provider, label, api_key)
        record, stored_for = await self._store.insert(
            NewCredential(
                id=credential_id,
                user_id=user_id,
                provider=provider,
                label=label,
                fingerprint=fingerprint(api_key),
                sealed=keyring.seal(api_key, binding(user_id, credential_id, provider)),
                idempotency_key=idempotency_key or None,
                request_hash=asked if idempotency_key else "",
            )
        )
        if stored_for is None:
            log.info("credential %s stored for provider %s", record.id, provider)
        elif not hmac.compare_digest(stored_for, asked):
            raise IdempotencyKeyReused(
                "this idempotency key stored another credential",
                [FieldViolation("idempotency_key", "already used with other parameters")],
            )
        return record

    async def list_for(self, user_id: str) -> list[CredentialRecord]:
        require_name("user_id", user_id)
        return await self._store.for_user(user_id)

    async def delete(self, user_id: str, credential_id: str) -> None:
        require_name("user_id", user_id)
        require_uuid("credential_id", credential_id)
        if not await self._store.delete(credential_id, user_id):
            raise CredentialNotFound("no such credential")
        log.info("credential %s deleted", credential_id)

    # --- ExecutorService.ResolveCredential ---------------------------------------------

    async def resolve(self, job_id: str, lease_token: str) -> ResolvedKey:
        """The job's user key, for the holder of its current lease."""
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        # while the lease is held, cancel pending or not (as for heartbeats)
        found = await self._store.for_attempt(job_id, lease_token, status_values(LEASED))
        if found is None:
            raise LeaseLost("the lease on this job is no longer held")
        if found.mode is not CredentialMode.USER or found.credential_id is None:
            raise CredentialUnavailable("this job runs on the platform's key, not a user's")
        if found.sealed is None or found.provider is None:
            raise CredentialNotFound("the job's credential has been deleted")
        keyring = self._require_keyring()
        try:
            api_key = keyring.open(
                found.sealed, binding(found.user_id, found.credential_id, found.provider)
            )
        except SealBroken as broken:
            # operator detail (key ids only); the worker learns that it cannot be used
            log.error("credential %s of job %s: %s", found.credential_id, job_id, broken)
            raise CredentialUnavailable("the job's credential cannot be opened") from None
        return ResolvedKey(api_key, found.provider, found.credential_id)

    # --- master keys -------------------------------------------------------------------

    async def check_master_keys(self) -> None:
        """MasterKeyMissing when a stored key was sealed under a master key that is not
        configured (or none is): jobs using it could never run."""
        stored = await self._store.key_ids()
        configured = self._keyring.key_ids if self._keyring else frozenset()
        missing = sorted(stored - configured)
        if missing:
            raise MasterKeyMissing(
                "user credentials are stored under master key(s) "
                f"{', '.join(missing)}, which JOBS_CREDENTIALS_MASTER_KEY and "
                "JOBS_CREDENTIALS_RETIRED_MASTER_KEYS do not provide"
            )

    async def reseal_all(self) -> int:
        """Re-seal every key not sealed under the current master key; how many were."""
        keyring = self._require_keyring()
        done = 0
        while batch := await self._store.not_sealed_under(keyring.current_id, RESEAL_BATCH):
            for credential_id, user_id, provider, sealed in batch:
                fresh = keyring.reseal(sealed, binding(user_id, credential_id, provider))
                if fresh is not None and await self._store.reseal(
                    credential_id, sealed.key_id, fresh
                ):
                    done += 1
        return done

    def _require_keyring(self) -> Keyring:
        if self._keyring is None:
            raise CredentialUnavailable("user credentials are not enabled on this deployment")
        return self._keyring


def _check_provider(provider: str) -> None:
    if not PROVIDER_PATTERN.fullmatch(provider):
        raise InvalidInput(
            "provider is missing or malformed",
            [
                FieldViolation(
                    "provider",
                    "1-64 characters: lower-case letters, digits, '_', '.', '-', "
                    "starting with a letter",
                )
            ],
        )


def _check_api_key(api_key: str) -> None:
    # The key is never quoted back: the violation says what is wrong, not what was sent.
    if (
        not api_key
        or len(api_key) > MAX_API_KEY_CHARS
        or not api_key.isprintable()
        or any(c.isspace() for c in api_key)
    ):
        raise InvalidInput(
            "api_key is missing or malformed",
            [
                FieldViolation(
                    "api_key", f"1..{MAX_API_KEY_CHARS} printable characters without spaces"
                )
            ],
        )
