"""The asyncpg pool every postgres adapter shares: jsonb as Python values, no per-checkout
reset, one error for "PostgreSQL cannot be reached", and the guards that make a frozen or
cut-off replica let go of what it holds (``SessionGuards``)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import asyncpg

from shared.tcp_keepalive import TcpKeepalive

# The hot path's session (CreateJob, the claims, SubmitResults, leases, the outbox): the
# plan of each prepared statement made once per connection and reused. By default
# PostgreSQL plans these statements again on every execution (their custom plans looked
# no dearer than a generic one), and planning grows with the tables (the planner reads
# the indexes' ends to estimate ranges): on 1.1 M jobs CreateJob took 4.3 ms against 3.2
# empty, with generic plans 3.0 against 3.0 (docs/benchmarks.md). Statements with optional
# filters, whose best plan depends on the values, stay on the other pool's custom plans.
HOT_PATH_SESSION = {"plan_cache_mode": "force_generic_plan"}


async def init_connection(conn: asyncpg.Connection) -> None:
    """jsonb in and out as Python values."""
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def keep_session(conn: asyncpg.Connection) -> None:
    """Release a connection to the pool as it is. The default reset costs a round trip
    per checkout (RESET ALL, UNLISTEN, ...) to undo session state these queries never
    create; an open transaction is still rolled back by asyncpg itself."""


@dataclass(frozen=True)
class SessionGuards:
    """What bounds the rows and locks one connection can hold when its process stops
    talking (SIGSTOP, a long pause, a network cut with the connection still up): PostgreSQL
    ends a session left idle inside a transaction after ``idle_in_transaction_s`` (rolling
    it back and releasing its locks), fails a statement waiting longer than
    ``lock_timeout_s`` for a lock and one running longer than ``statement_timeout_s`` (0:
    no limit), and both ends drop a connection whose peer stays silent past the keepalive's
    ``dead_after_s`` (docs/architecture.md, "Frozen and cut-off replicas")."""

    idle_in_transaction_s: float
    lock_timeout_s: float
    statement_timeout_s: float
    keepalive: TcpKeepalive

    def server_settings(self) -> dict[str, str]:
        """The session's side, told to the server at connection (``SET`` values)."""
        k = self.keepalive
        return {
            "idle_in_transaction_session_timeout": _ms(self.idle_in_transaction_s),
            "lock_timeout": _ms(self.lock_timeout_s),
            "statement_timeout": _ms(self.statement_timeout_s),
            # the server's socket (TCP connections only; ignored on a Unix socket)
            "tcp_keepalives_idle": str(k.idle_s),
            "tcp_keepalives_interval": str(k.interval_s),
            "tcp_keepalives_count": str(k.count),
            "tcp_user_timeout": str(k.dead_after_s * 1000),
        }

    def for_migrations(self) -> dict[str, str]:
        """A migration may wait for its table locks and run long statements; it must not
        hold them while its process is stopped."""
        return {
            name: value
            for name, value in self.server_settings().items()
            if name not in {"lock_timeout", "statement_timeout"}
        }


def _ms(seconds: float) -> str:
    return str(round(seconds * 1000))


class DatabaseUnreachable(ConnectionError):
    """No new connection to PostgreSQL could be made (down, restarting, refusing, at its
    connection limit): an outage to report as PLATFORM_UNAVAILABLE, whatever the cause."""


async def _connect(
    *args: Any, keepalive: TcpKeepalive | None = None, **kwargs: Any
) -> asyncpg.Connection:
    try:
        conn: asyncpg.Connection = await asyncpg.connect(*args, **kwargs)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise DatabaseUnreachable(f"cannot connect to PostgreSQL: {error}") from error
    if keepalive is not None:
        # asyncpg has no keepalive option: its socket, through the transport it keeps
        sock = conn._transport.get_extra_info("socket")  # type: ignore[attr-defined]
        if sock is not None:
            keepalive.apply(sock)
    return conn


async def create_pool(
    database_url: str,
    size: int,
    session: dict[str, str] | None = None,
    guards: SessionGuards | None = None,
) -> asyncpg.Pool:
    """``session``: settings every connection starts with (``jobs.*`` for the scheduler);
    ``guards``: the timeouts and keepalives of every connection (none: the server's)."""
    server_settings = {**(guards.server_settings() if guards else {}), **(session or {})}
    return await asyncpg.create_pool(
        database_url,
        server_settings=server_settings,
        connect=functools.partial(_connect, keepalive=guards.keepalive if guards else None),
        min_size=min(2, size),
        max_size=size,
        init=init_connection,
        reset=keep_session,
    )
