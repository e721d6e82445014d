"""Payloads at rest, sealed under a data key: AES-256-GCM with the row and field as
associated data, so that a ciphertext moved to another job, or to another field of the
same job, does not open.

A data key is 32 random bytes, one per user (crypto-shredding: destroying a user's data key
makes every copy of their payloads unreadable, backups included); it is stored only
wrapped by the key-encryption key (``job_service.ports.key_encryption``). A sealed payload
is ``version (1 byte) || nonce (12) || ciphertext with its tag``; the version byte lets
the format change and tells a sealed payload from a plaintext one written before
encryption (a JSON text never starts with byte 0x01).

In a JSON column (jsonb) a sealed payload is stored as a JSON string, ``SEALED_TEXT``
then the base64 of those bytes (``as_text``): the payloads sealed are JSON objects (an
input, an output, an artifact's or a signal's payload) or are sealed whole with a text
(a step's response), so a stored JSON string is never a plaintext payload, and every
statement that moves a payload within its job's rows keeps working on the column as it is.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

DATA_KEY_BYTES = 32
NONCE_BYTES = 12
VERSION = b"\x01"
# Domain separation: this product's payload bindings mean nothing elsewhere.
_AAD_PREFIX = b"jobs.v1/payload\x00"
_KEY_AAD_PREFIX = b"jobs.v1/data-key\x00"
# A stored JSON string starting with this is a sealed payload (base64 after it).
SEALED_TEXT = "sealed:v1:"


class PayloadBroken(Exception):
    """A sealed payload does not open: another row's or field's, another key's, or
    tampered with."""


# The fields payloads are bound to (with their row's id: a job's, a schedule's): a job's
# input (its snapshot) and output, an artifact's payload, a step's response, a signal's
# payload, a schedule's template input, an attempt's internal error message.
INPUT = "input"
OUTPUT = "output"
SCHEDULE_INPUT = "schedule_input"
INTERNAL_ERROR = "internal_error"


def artifact_field(artifact_type: str, artifact_id: str) -> str:
    return f"artifact/{artifact_type}/{artifact_id}"


def step_field(step: str) -> str:
    return f"step/{step}"


def step_result_field(ordinal: int) -> str:
    """A durable step's result (its error message: ``…/error``)."""
    return f"step_result/{ordinal}"


def signal_field(name: str) -> str:
    return f"signal/{name}"


def new_data_key() -> bytes:
    return os.urandom(DATA_KEY_BYTES)


def payload_binding(job_id: str, field: str) -> bytes:
    """The associated data of one payload: the job (or the row's own id) and the field,
    e.g. ``payload_binding(job_id, "input")``, ``(job_id, "artifact/<artifact_id>")``."""
    return _AAD_PREFIX + job_id.encode() + b"\x00" + field.encode()


def data_key_binding(owner: str) -> bytes:
    """The associated data a data key is wrapped with: whose key it is (a user id)."""
    return _KEY_AAD_PREFIX + owner.encode()


def is_sealed(stored: bytes) -> bool:
    """Whether a stored value is a sealed payload (else: plaintext from before)."""
    return stored[:1] == VERSION


def seal(data_key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)  # random 96-bit nonces: 2^32 seals per key stay safe
    return VERSION + nonce + AESGCM(data_key).encrypt(nonce, plaintext, aad)


def open_sealed(data_key: bytes, stored: bytes, aad: bytes) -> bytes:
    if not is_sealed(stored) or len(stored) < 1 + NONCE_BYTES + 16:
        raise PayloadBroken("not a sealed payload")
    nonce, ciphertext = stored[1 : 1 + NONCE_BYTES], stored[1 + NONCE_BYTES :]
    try:
        return AESGCM(data_key).decrypt(nonce, ciphertext, aad)
    except InvalidTag:
        raise PayloadBroken("the payload does not open with this key and binding") from None


def as_text(sealed: bytes) -> str:
    """A sealed payload as a JSON column stores it."""
    return SEALED_TEXT + base64.b64encode(sealed).decode()


def from_text(stored: object) -> bytes | None:
    """The sealed payload a JSON column's value holds, or None for a plaintext one."""
    if isinstance(stored, str) and stored.startswith(SEALED_TEXT):
        return base64.b64decode(stored[len(SEALED_TEXT) :])
    return None
