"""Users' provider keys at rest: sealed with AES-256-GCM under a master key.

A sealed key is bound to its row: the associated data is (user id, credential id,
provider), so a ciphertext copied to another row — another user's, another id — fails to
open. Each seal records the id of the master key used (derived from the key itself), so the
master key can be rotated: new seals use the current key, and retired keys still open what
they sealed until it is re-sealed (``python -m job_service reseal-credentials``).

Master keys are 32 random bytes, written as unpadded or padded URL-safe base64
(``python -c "import os,base64;print(base64.urlsafe_b64encode(os.urandom(32)).decode())"``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.credentials import CredentialMode

MASTER_KEY_BYTES = 32
NONCE_BYTES = 12
# Domain separation: the AAD and key ids of this product mean nothing elsewhere.
_AAD_PREFIX = b"jobs.v1/credential\x00"
_KEY_ID_PREFIX = b"jobs.v1/credential-key-id\x00"


class MasterKeyError(ValueError):
    """A configured master key is malformed (the message never contains the key)."""


class SealBroken(Exception):
    """A sealed key cannot be opened: tampered with, moved to another row, or sealed under
    a master key that is not configured."""


@dataclass(frozen=True)
class Sealed:
    """A key as stored: the master key's id, a fresh nonce, and the AES-GCM ciphertext
    (with its tag)."""

    key_id: str
    nonce: bytes
    ciphertext: bytes

    def __repr__(self) -> str:  # bytes are noise in logs; lengths are enough
        return f"Sealed(key_id={self.key_id!r}, {len(self.ciphertext)} bytes)"


@dataclass(frozen=True)
class CredentialRecord:
    """A stored credential without its key."""

    id: str
    user_id: str
    provider: str
    label: str
    fingerprint: str
    created_at: datetime
    last_used_at: datetime | None


@dataclass(frozen=True)
class NewCredential:
    id: str
    user_id: str
    provider: str
    label: str
    fingerprint: str
    sealed: Sealed
    # PutCredential's idempotency key (None: none) and the hash of what it asked to store
    idempotency_key: str | None = None
    request_hash: str = ""


@dataclass(frozen=True)
class AttemptCredential:
    """What the holder of a job's lease may learn about the job's key: its mode and, for
    a user's key that still exists, the sealed key and what it is bound to."""

    mode: CredentialMode
    credential_id: str | None
    user_id: str
    provider: str | None
    sealed: Sealed | None


@dataclass(frozen=True)
class ResolvedKey:
    """A user's key, opened for one attempt. Its repr hides the key."""

    api_key: str
    provider: str
    credential_id: str

    def __repr__(self) -> str:
        return f"ResolvedKey(provider={self.provider!r}, credential_id={self.credential_id!r})"


def binding(user_id: str, credential_id: str, provider: str) -> bytes:
    """The associated data a key is sealed with: what row it belongs to."""
    parts = (user_id, credential_id, provider)
    return _AAD_PREFIX + b"\x00".join(p.encode() for p in parts)


def parse_master_key(text: str) -> bytes:
    """32 bytes from URL-safe (or standard) base64; MasterKeyError otherwise."""
    cleaned = text.strip()
    padded = cleaned + "=" * (-len(cleaned) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))
    except (binascii.Error, ValueError):
        raise MasterKeyError("a master key must be base64") from None
    if len(raw) != MASTER_KEY_BYTES:
        raise MasterKeyError(f"a master key must decode to {MASTER_KEY_BYTES} bytes")
    return raw


def key_id(master_key: bytes) -> str:
    """A short public name for a master key (stored with each seal)."""
    return hashlib.sha256(_KEY_ID_PREFIX + master_key).hexdigest()[:16]


def new_master_key() -> str:
    """A fresh master key, as text."""
    return base64.urlsafe_b64encode(os.urandom(MASTER_KEY_BYTES)).decode()


class Keyring:
    """The current master key (seals and opens) and retired ones (open only)."""

    def __init__(self, current: bytes, retired: tuple[bytes, ...] = ()) -> None:
        self.current_id = key_id(current)
        self._ciphers = {key_id(k): AESGCM(k) for k in (*retired, current)}

    @classmethod
    def from_text(cls, current: str, retired: str = "") -> Keyring:
        """From the settings' text: the current key, and retired ones comma-separated."""
        old = tuple(parse_master_key(k) for k in retired.split(",") if k.strip())
        return cls(parse_master_key(current), old)

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._ciphers)

    def seal(self, api_key: str, aad: bytes) -> Sealed:
        nonce = os.urandom(NONCE_BYTES)  # random 96-bit nonces: safe far beyond our volumes
        ciphertext = self._ciphers[self.current_id].encrypt(nonce, api_key.encode(), aad)
        return Sealed(self.current_id, nonce, ciphertext)

    def open(self, sealed: Sealed, aad: bytes) -> str:
        cipher = self._ciphers.get(sealed.key_id)
        if cipher is None:
            raise SealBroken(f"sealed under master key {sealed.key_id}, which is not configured")
        try:
            return cipher.decrypt(sealed.nonce, sealed.ciphertext, aad).decode()
        except InvalidTag:
            raise SealBroken("the sealed key does not open with its binding") from None

    def reseal(self, sealed: Sealed, aad: bytes) -> Sealed | None:
        """The same key sealed under the current master key, or None when it already is."""
        if sealed.key_id == self.current_id:
            return None
        return self.seal(self.open(sealed, aad), aad)
