"""The schema Alembic builds is the schema tables.py describes."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from job_service.adapters.postgres.migrations import sqlalchemy_url
from job_service.adapters.postgres.tables import metadata


async def test_migrated_schema_matches_the_table_metadata(database_url: str) -> None:
    engine = create_async_engine(sqlalchemy_url(database_url))
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"compare_type": True}), metadata
                )
            )
    finally:
        await engine.dispose()

    assert diff == []
