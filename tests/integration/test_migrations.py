"""The schema Alembic builds is the schema tables.py describes."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from job_service.adapters.postgres.migrations import sqlalchemy_url
from job_service.adapters.postgres.tables import metadata

# Indexes on an expression, which Alembic's comparison cannot read back (it reports each as
# removed and added): compared here by PostgreSQL's own definition instead.
EXPRESSION_INDEXES = {
    "jobs_id_tail": "CREATE INDEX jobs_id_tail ON public.jobs USING btree "
    "(reverse(replace((id)::text, '-'::text, ''::text)) COLLATE \"C\")",
}


def _expression_index(op: Any) -> bool:
    return op[0] in ("add_index", "remove_index") and op[1].name in EXPRESSION_INDEXES


async def test_migrated_schema_matches_the_table_metadata(database_url: str) -> None:
    engine = create_async_engine(sqlalchemy_url(database_url))
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"compare_type": True}), metadata
                )
            )
            defined = dict(
                (
                    await conn.execute(
                        text(
                            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(:n)"
                        ),
                        {"n": list(EXPRESSION_INDEXES)},
                    )
                ).all()
            )
    finally:
        await engine.dispose()

    assert [op for op in diff if not _expression_index(op)] == []
    assert defined == EXPRESSION_INDEXES
