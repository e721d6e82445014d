"""Alembic environment: online migrations over the asyncpg driver."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from job_service.adapters.postgres.tables import metadata


def _migrate(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    assert url is not None
    # the session guards of the migrate command (a stopped migration must not keep its
    # table locks), none when called without
    server_settings = context.config.attributes.get("server_settings", {})
    engine = create_async_engine(
        url, poolclass=pool.NullPool, connect_args={"server_settings": server_settings}
    )
    async with engine.connect() as connection:
        await connection.run_sync(_migrate)
    await engine.dispose()


asyncio.run(_run())
