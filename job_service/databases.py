"""job_service's PostgreSQL sessions as the settings shape them, and what runs against the
database before (or instead of) serving: the schema check, the credentials' re-sealing."""

from __future__ import annotations

import logging

import asyncpg

from job_service.adapters.postgres.credentials import CredentialRepository
from job_service.adapters.postgres.pool import SessionGuards, create_pool
from job_service.adapters.postgres.schema_version import schema_state
from job_service.settings import JobServiceSettings
from job_service.usecases.credentials import CredentialVault
from shared.startup import StartupError

log = logging.getLogger(__name__)


async def reseal_credentials(settings: JobServiceSettings) -> int:
    """Re-seal every stored user key under the current master key (after a rotation, so
    that the retired key can be dropped); how many were re-sealed."""
    keyring = settings.keyring()
    if keyring is None:
        raise ValueError("JOBS_CREDENTIALS_MASTER_KEY is not set")
    pool = await create_pool(settings.database_url, 2, guards=session_guards(settings, hot=False))
    try:
        return await CredentialVault(CredentialRepository(pool), keyring).reseal_all()
    finally:
        await pool.close()


def session_guards(s: JobServiceSettings, *, hot: bool = True) -> SessionGuards:
    """Every PostgreSQL connection's timeouts and keepalives (``JOBS_DB_*``); hot: the pool's."""
    statement_s = s.db_statement_timeout_s if hot else s.db_rest_statement_timeout_s
    idle_s, lock_s = s.db_idle_in_transaction_timeout_s, s.db_lock_timeout_s
    return SessionGuards(idle_s, lock_s, statement_s, s.db_keepalive())


def rest_pool_size(s: JobServiceSettings) -> int:
    """The connections of the pool beside the hot path's (``JOBS_DB_POOL_SIZE``): reads,
    admin calls and the background loops, half as many (two at least)."""
    return max(2, s.db_pool_size // 2)


async def check_schema(pool: asyncpg.Pool) -> None:
    """Refuse to serve a schema behind this release's migrations (the migration Job of the
    release has not run, or failed); serve one ahead of them (expand-only migrations: a
    rollback or the old pods of a rolling update), with a warning."""
    state = await schema_state(pool)
    if state.behind:
        found = ", ".join(state.database) or "no schema"
        raise StartupError(
            f"the database schema is at {found}, this release needs {', '.join(state.heads)}:"
            " run `python -m job_service migrate` first"
        )
    if state.ahead:
        log.warning(
            "the database schema (%s) is newer than this release's (%s); serving",
            ", ".join(state.database),
            ", ".join(state.heads),
        )
