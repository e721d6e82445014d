"""Sessions: the admin token a user signed in with, and the console session job_service
opened for it, kept in an encrypted cookie.

The cookie is a Fernet token (AES-128-CBC + HMAC, with its issue time) over the bearer
token, the console session's id and the session's CSRF token, so nothing readable reaches
the browser. The session itself lives in job_service (AdminService.OpenConsoleSession):
every guarded request checks it (``console.site``), so signing out, an idle timeout or a
revocation ends it on every console replica at once, and a copied cookie is refused after
it ended. Any replica with the same key can read any cookie. The cookie is HttpOnly,
SameSite=Strict, and Secure when the console is reached over TLS. Every form carries the
CSRF token; ``csrf_ok`` compares it in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken

SESSION_COOKIE = "jobs_console_session"
# Before sign-in: a random value the sign-in form must echo (login CSRF).
SIGNIN_COOKIE = "jobs_console_signin"


@dataclass(frozen=True)
class Session:
    token: str
    csrf: str
    # The console session's id in job_service: a secret, like the token.
    session_id: str = ""
    # Who signed in (job_service's name for the token), as the last check said.
    principal: str = ""


class SessionCodec:
    def __init__(self, secret: str | None, ttl_s: float) -> None:
        key = hashlib.sha256(secret.encode()).digest() if secret else secrets.token_bytes(32)
        self._fernet = Fernet(base64.urlsafe_b64encode(key))
        self.ttl_s = ttl_s

    def new(self, token: str, session_id: str = "", principal: str = "") -> tuple[Session, str]:
        """A new session for ``token`` (and job_service's session ``session_id``) and its
        cookie value."""
        session = Session(
            token=token, csrf=secrets.token_urlsafe(32), session_id=session_id, principal=principal
        )
        data = {"t": token, "c": session.csrf, "s": session_id, "p": principal}
        value = self._fernet.encrypt(json.dumps(data).encode())
        return session, value.decode()

    def read(self, cookie: str | None) -> Session | None:
        """The session in ``cookie``; None when absent, forged, or older than the TTL."""
        if not cookie:
            return None
        try:
            data = json.loads(self._fernet.decrypt(cookie.encode(), ttl=int(self.ttl_s)))
            return Session(
                token=str(data["t"]),
                csrf=str(data["c"]),
                session_id=str(data.get("s", "")),
                principal=str(data.get("p", "")),
            )
        except (InvalidToken, ValueError, KeyError, TypeError, AttributeError):
            return None


def csrf_ok(expected: str, given: str | None) -> bool:
    return bool(expected) and given is not None and hmac.compare_digest(expected, given)
