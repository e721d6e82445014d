"""What envelope encryption needs from a key-encryption key (KEK): to wrap a data key and
to unwrap it again. The KEK itself never leaves its implementation: a local key from
``JOBS_DATA_KEK`` (``job_service.adapters.local_kek``), or a cloud KMS, whose key stays in
the KMS and whose calls are why these methods are async.

Rotation: ``current_id`` names the KEK new wraps use; ``unwrap`` opens anything wrapped
under a KEK the implementation still holds (the current one and retired ones), so a new
KEK is rolled out first, data keys are re-wrapped in the background (a wrapped key whose
``kek_id`` is not ``current_id``), and the old KEK is retired once none is left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class UnwrapFailed(Exception):
    """A wrapped key does not open: wrapped under a KEK not configured, for other
    associated data (another user's key moved to this row), or tampered with."""


@dataclass(frozen=True)
class WrappedKey:
    """A data key as stored: the id of the KEK that wrapped it and the wrapping (opaque:
    a KMS's ciphertext blob, or the local KEK's nonce and AES-GCM ciphertext)."""

    kek_id: str
    blob: bytes

    def __repr__(self) -> str:  # bytes are noise in logs
        return f"WrappedKey(kek_id={self.kek_id!r}, {len(self.blob)} bytes)"


class KeyEncryptionKey(Protocol):
    @property
    def current_id(self) -> str:
        """The id of the KEK that ``wrap`` uses (stored with each wrapped key)."""
        ...

    @property
    def key_ids(self) -> frozenset[str]:
        """Every KEK ``unwrap`` can use: the current one and retired ones."""
        ...

    async def wrap(self, data_key: bytes, aad: bytes) -> WrappedKey:
        """``data_key`` wrapped under the current KEK, bound to ``aad`` (e.g. the user
        whose key it is): unwrapping needs the same ``aad``."""
        ...

    async def unwrap(self, wrapped: WrappedKey, aad: bytes) -> bytes:
        """The data key; UnwrapFailed when it does not open with ``aad``."""
        ...
