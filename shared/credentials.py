"""Which provider key a job runs with, as both services and the job types see it.

``PLATFORM``: the deployment's own key for the model tier, from the environment; it never
enters the database. ``USER``: a key the job's owner stored through CredentialService
("bring your own key"); the job holds only its id, and the worker running the job obtains
the plaintext through ``ExecutorService.ResolveCredential`` while it holds the job's lease.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum


class CredentialMode(StrEnum):
    PLATFORM = "platform"
    USER = "user"


# Provider names are the model router's (e.g. "openai", "deepseek"); not a fixed list here,
# so that a new provider needs no change to the credential code.
PROVIDER_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
MAX_API_KEY_CHARS = 4096
FINGERPRINT_HEX_CHARS = 16


def fingerprint(api_key: str) -> str:
    """What a key is shown as: ``sha256:<first 16 hex digits>``. Enough to tell keys apart
    and to check one (``printf %s "$KEY" | sha256sum``); says nothing usable about the key,
    whose entropy makes the truncated hash impossible to invert."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()
    return f"sha256:{digest[:FINGERPRINT_HEX_CHARS]}"
