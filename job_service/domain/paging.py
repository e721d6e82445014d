"""Page tokens: opaque to callers, unforgeable, and bound to the listing they came from.

A token is ``<payload>.<mac>`` (both base64url): the payload is the keyset cursor(s) where
the next page starts, the mac an HMAC-SHA256 over the payload *and the listing's scope*
(which user, which filters). A token edited by hand, made up, or taken from another user's
(or another filter's) listing fails the check and is refused as INVALID_ARGUMENT — it can
never reveal a row the caller could not list anyway. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

from job_service.domain.selection import Cursor
from shared.errors import FieldViolation, InvalidInput

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
MAX_TOKEN_CHARS = 1024
_MAC_BYTES = 16


def page_size(requested: int) -> int:
    """The page size to use: the default for 0, at most MAX_PAGE_SIZE; negative refused."""
    if requested < 0:
        raise InvalidInput(
            "page_size must not be negative",
            [FieldViolation("page_size", f"0 (default {DEFAULT_PAGE_SIZE}) .. {MAX_PAGE_SIZE}")],
        )
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _invalid() -> InvalidInput:
    return InvalidInput(
        "page_token is not valid for this listing",
        [FieldViolation("page_token", "pass next_page_token from the same listing, unchanged")],
    )


class PageTokens:
    """Issues and reads page tokens with one secret (shared by every replica)."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the page token secret needs at least 16 bytes")
        self._secret = secret

    def _mac(self, scope: dict[str, Any], payload: bytes) -> bytes:
        bound = json.dumps(scope, sort_keys=True, default=str).encode() + b"\x00" + payload
        return hmac.new(self._secret, bound, hashlib.sha256).digest()[:_MAC_BYTES]

    def issue(self, scope: dict[str, Any], cursors: dict[str, Cursor | None]) -> str:
        """A token for the page after ``cursors`` (named, None = that part is exhausted);
        the empty string when every part is exhausted."""
        if all(c is None for c in cursors.values()):
            return ""
        payload = json.dumps(
            {
                name: None if c is None else [c.created_at.isoformat(), c.id]
                for name, c in sorted(cursors.items())
            },
            separators=(",", ":"),
        ).encode()
        return f"{_b64(payload)}.{_b64(self._mac(scope, payload))}"

    def read(self, token: str, scope: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        """The cursors a token carries: name → Cursor, or None for an exhausted part. An
        empty token means the first page: every part starts from the top (``"start"``)."""
        if not token:
            return dict.fromkeys(names, "start")
        if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
            raise _invalid()
        payload_text, mac_text = token.split(".")
        try:
            payload, mac = _unb64(payload_text), _unb64(mac_text)
        except (binascii.Error, ValueError):
            raise _invalid() from None
        if not hmac.compare_digest(mac, self._mac(scope, payload)):
            raise _invalid()
        # Signed by us for this scope: the payload has the shape we wrote.
        raw = json.loads(payload)
        if set(raw) != set(names):
            raise _invalid()
        return {
            name: None
            if value is None
            else Cursor(created_at=datetime.fromisoformat(value[0]), id=value[1])
            for name, value in raw.items()
        }
