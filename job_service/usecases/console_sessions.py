"""The web console's sessions (AdminService.*ConsoleSession*): a sign-in opens one for the
calling principal and the console checks it on every page, so that signing out, an idle
timeout, or an admin revoking a principal's sessions ends it on every console replica at
once. The secret naming a session is given once to the console (in its encrypted cookie);
the service keeps only its hash, and only the principal that opened a session can check
or close it."""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta

from job_service.domain.checks import require_name
from job_service.domain.console_sessions import OpenedSession, lifetime
from job_service.ports.console_sessions import ConsoleSessionStore
from shared.errors import FieldViolation, InvalidInput, Unauthenticated

log = logging.getLogger(__name__)

# the secret's length as token_urlsafe writes 32 random bytes
SECRET_CHARS = 43


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _require_secret(secret: str) -> None:
    if len(secret) != SECRET_CHARS or not secret.isascii() or not secret.isprintable():
        raise InvalidInput(
            "session_id is not a console session's id",
            [FieldViolation("session_id", "the id OpenConsoleSession answered")],
        )


class ConsoleSessions:
    def __init__(self, store: ConsoleSessionStore) -> None:
        self._store = store

    async def open(self, principal: str, idle: timedelta, max_age: timedelta) -> OpenedSession:
        require_name("principal", principal)
        life = lifetime(idle, max_age)
        secret = secrets.token_urlsafe(32)
        expires_at = await self._store.open(_hash(secret), principal, life.idle, life.max_age)
        log.info("console session opened for %s", principal)
        return OpenedSession(secret, principal, expires_at)

    async def check(self, secret: str, principal: str) -> OpenedSession:
        """The live session (seen now); Unauthenticated when it has ended, or is not the
        caller's."""
        _require_secret(secret)
        expires_at = await self._store.touch(_hash(secret), principal)
        if expires_at is None:
            raise Unauthenticated("the console session has ended; sign in again")
        return OpenedSession("", principal, expires_at)

    async def close(self, secret: str, principal: str) -> None:
        """Ends the session; closing one already ended (or not the caller's) does nothing."""
        _require_secret(secret)
        await self._store.close(_hash(secret), principal)
        log.info("console session closed by %s", principal)

    async def revoke(self, principal: str, by: str) -> int:
        require_name("principal", principal)
        revoked = await self._store.revoke(principal)
        log.info("%d console sessions of %s revoked by %s", revoked, principal, by)
        return revoked
