"""The asyncpg pool every postgres adapter shares: jsonb as Python values, no per-checkout
reset, and one error for "PostgreSQL cannot be reached"."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

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


class DatabaseUnreachable(ConnectionError):
    """No new connection to PostgreSQL could be made (down, restarting, refusing, at its
    connection limit): an outage to report as PLATFORM_UNAVAILABLE, whatever the cause."""


async def _connect(*args: Any, **kwargs: Any) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(*args, **kwargs)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise DatabaseUnreachable(f"cannot connect to PostgreSQL: {error}") from error


async def create_pool(
    database_url: str, size: int, session: dict[str, str] | None = None
) -> asyncpg.Pool:
    """``session``: settings every connection starts with (``jobs.*`` for the scheduler)."""
    return await asyncpg.create_pool(
        database_url,
        server_settings=session or {},
        connect=_connect,
        min_size=min(2, size),
        max_size=size,
        init=init_connection,
        reset=keep_session,
    )
