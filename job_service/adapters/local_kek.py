"""The key-encryption key held by the job service itself: 32 bytes from ``JOBS_DATA_KEK``
(or the file named by ``JOBS_DATA_KEK_FILE``), former ones from ``JOBS_DATA_RETIRED_KEKS``.
A data key is wrapped with AES-256-GCM under it, bound to its owner; its id is derived from
the key, so rotation needs no bookkeeping: configure a new KEK with the old one retired,
re-wrap, then drop the old one.

A separate key from the credentials master key (``JOBS_CREDENTIALS_MASTER_KEY``): the two
rotate on their own schedules, and a deployment can move this one to a cloud KMS (another
implementation of ``job_service.ports.key_encryption``) while provider keys stay sealed
locally. The text format is the same (32 random bytes, URL-safe base64).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from job_service.domain.credentials import MasterKeyError, parse_master_key
from job_service.ports.key_encryption import UnwrapFailed, WrappedKey

NONCE_BYTES = 12
_KEY_ID_PREFIX = b"jobs.v1/data-kek-id\x00"


class KekConfigError(ValueError):
    """The KEK configuration is malformed or unreadable; never quotes a key."""


def kek_id(kek: bytes) -> str:
    """A short public name for a KEK (stored with each wrapped data key)."""
    return "local:" + hashlib.sha256(_KEY_ID_PREFIX + kek).hexdigest()[:16]


class LocalKeyEncryptionKey:
    """The current KEK (wraps and unwraps) and retired ones (unwrap only)."""

    def __init__(self, current: bytes, retired: tuple[bytes, ...] = ()) -> None:
        self._current_id = kek_id(current)
        self._ciphers = {kek_id(k): AESGCM(k) for k in (*retired, current)}

    @classmethod
    def from_text(cls, current: str, retired: str = "") -> LocalKeyEncryptionKey:
        """From settings' text: the current KEK, retired ones comma-separated."""
        try:
            old = tuple(parse_master_key(k) for k in retired.split(",") if k.strip())
            return cls(parse_master_key(current), old)
        except MasterKeyError as error:
            raise KekConfigError(f"a data KEK: {str(error).replace('master key', 'KEK')}") from None

    @classmethod
    def from_config(
        cls, kek: str, kek_file: str, retired: str = ""
    ) -> LocalKeyEncryptionKey | None:
        """``kek`` (JOBS_DATA_KEK), else the file ``kek_file`` (JOBS_DATA_KEK_FILE); None
        when neither is set."""
        if not kek.strip() and kek_file:
            try:
                kek = Path(kek_file).read_text()
            except OSError as error:
                raise KekConfigError(
                    f"JOBS_DATA_KEK_FILE: cannot read {kek_file}: {error.strerror}"
                ) from None
        return cls.from_text(kek, retired) if kek.strip() else None

    @property
    def current_id(self) -> str:
        return self._current_id

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._ciphers)

    async def wrap(self, data_key: bytes, aad: bytes) -> WrappedKey:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self._current_id].encrypt(nonce, data_key, aad)
        return WrappedKey(self._current_id, nonce + sealed)

    async def unwrap(self, wrapped: WrappedKey, aad: bytes) -> bytes:
        cipher = self._ciphers.get(wrapped.kek_id)
        if cipher is None:
            raise UnwrapFailed(f"wrapped under KEK {wrapped.kek_id}, which is not configured")
        nonce, sealed = wrapped.blob[:NONCE_BYTES], wrapped.blob[NONCE_BYTES:]
        try:
            return cipher.decrypt(nonce, sealed, aad)
        except InvalidTag:
            raise UnwrapFailed("the data key does not open with this KEK and owner") from None
