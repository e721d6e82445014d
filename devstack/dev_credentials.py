"""A development stack's secrets, generated on its first start and kept in its data
directory (readable by the owner only): the master key for users' provider keys, the
key-encryption key for their data keys, and one auth token per role."""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path

MASTER_KEY_FILE = "credentials-master-key"


DATA_KEK_FILE = "data-kek"


def dev_master_key(data_dir: Path) -> str:
    """The data directory's master key for users' provider keys, created on first use
    (readable by this user only). A development convenience: production passes
    JOBS_CREDENTIALS_MASTER_KEY from its secret store."""
    return _dev_key(data_dir / MASTER_KEY_FILE)


def dev_data_kek(data_dir: Path) -> Path:
    """The file of the data directory's key-encryption key for users' data keys, created
    on first use (readable by this user only); production passes JOBS_DATA_KEK or
    JOBS_DATA_KEK_FILE from its secret store, or a KMS."""
    path = data_dir / DATA_KEK_FILE
    _dev_key(path)
    return path


def _dev_key(path: Path) -> str:
    """32 random bytes (URL-safe base64) kept in ``path``, created on first use."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as file:
        file.write(base64.urlsafe_b64encode(os.urandom(32)).decode() + "\n")
    return path.read_text().strip()


ROLES = ("client", "admin", "worker")
TOKENS_FILE = "auth-tokens.json"


def dev_tokens(data_dir: Path) -> dict[str, str]:
    """role → token for a development stack: generated once, kept in ``data_dir``."""
    tokens = {}
    for role in ROLES:
        path = data_dir / f"{role}.token"
        if not path.exists():
            _write_private(path, secrets.token_urlsafe(32) + "\n")
        tokens[role] = path.read_text().strip()
    table = {token: {"principal": f"dev-{role}", "roles": [role]} for role, token in tokens.items()}
    _write_private(data_dir / TOKENS_FILE, json.dumps(table, indent=2) + "\n")
    return tokens


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
