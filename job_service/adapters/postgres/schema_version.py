"""Whether the database schema is the one this release's migrations end at.

``python -m job_service migrate`` (a Job per release) brings the schema to head before the
new pods roll out; a job_service started against a schema *behind* its own head refuses
to serve rather than fail queries on missing tables or columns. A schema *ahead* of it (a
revision this release does not know) is what a rolling update or a rollback looks like
with expand-only migrations: the old code still works, so it serves, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
from alembic.script import ScriptDirectory

from job_service.adapters.postgres.migrations import HERE

VERSION_QUERY = "SELECT version_num FROM alembic_version"


@dataclass(frozen=True)
class SchemaState:
    database: tuple[str, ...]
    heads: tuple[str, ...]
    known: frozenset[str]

    @property
    def at_head(self) -> bool:
        return set(self.database) == set(self.heads)

    @property
    def ahead(self) -> bool:
        """The database has a revision this release's migrations do not know."""
        return any(revision not in self.known for revision in self.database)

    @property
    def behind(self) -> bool:
        return not self.at_head and not self.ahead


def migration_heads() -> tuple[tuple[str, ...], frozenset[str]]:
    """This release's head revisions, and every revision it knows."""
    script = ScriptDirectory(str(HERE))
    known = frozenset(rev.revision for rev in script.walk_revisions())
    return tuple(script.get_heads()), known


async def schema_state(pool: asyncpg.Pool) -> SchemaState:
    heads, known = migration_heads()
    async with pool.acquire() as conn:
        table = await conn.fetchval("SELECT to_regclass('alembic_version')")
        rows = await conn.fetch(VERSION_QUERY) if table is not None else []
    return SchemaState(tuple(r["version_num"] for r in rows), heads, known)
