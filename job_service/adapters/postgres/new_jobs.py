"""New jobs on PostgreSQL: CreateJob's store. The statement (with quotas, snapshot, timeline
event and dispatch row, one statement) is a unit of work (``units.create_job``), as a
schedule's firing round runs it too; so is attaching a new job to its dependencies. A
re-run of a finished job is ``reruns.py``'s. What a new job brings and the rows it is
stored with are the vocabulary's (``vocabulary/new_job.py``)."""

from __future__ import annotations

from dataclasses import replace

import asyncpg

from job_service.adapters.postgres.units import attach, attach_retrying, create_job
from job_service.adapters.postgres.vocabulary.dependencies import CUSTOM_PLANS, OWNED
from job_service.domain.dependencies import SHOWN_EDGES
from job_service.domain.jobs import NewJob
from job_service.domain.outbox import OutboxMessage
from job_service.domain.quotas import QuotaRefusal, Quotas
from job_service.ports.jobs import Stored


class NewJobRepository:
    """New jobs (CreateJob's) with their snapshots, timeline and outbox rows,
    on one asyncpg pool. ``owner``: the replica whose dispatcher publishes the due rows it
    writes (None: they wait for a claim)."""

    def __init__(self, pool: asyncpg.Pool, owner: str | None = None) -> None:
        self._pool = pool
        self._owner = owner

    async def create(self, new: NewJob, quotas: Quotas) -> tuple[Stored, list[OutboxMessage]]:
        """Stores the job, its snapshot, its first timeline event and its dispatch row
        (claimed for the owner's dispatcher when due: returned to hand over). Returns the
        existing job instead when the idempotency key was used before (even at a quota
        limit), and a QuotaRefusal (nothing stored) when the user is at a limit."""
        if new.dependencies:
            return await attach_retrying(
                self._pool, lambda conn: _create_dependent(conn, new, quotas, self._owner)
            )
        async with self._pool.acquire() as conn:
            return await create_job(conn, new, quotas, self._owner)

    async def owned(self, job_ids: list[str], user_id: str) -> set[str]:
        """Which of ``job_ids`` are jobs of ``user_id``."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(CUSTOM_PLANS)  # as the attach's (units.attach)
            rows = await conn.fetch(OWNED, job_ids, user_id)
        return {r["id"] for r in rows}


async def _create_dependent(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    new: NewJob,
    quotas: Quotas,
    owner: str | None,
) -> tuple[Stored, list[OutboxMessage]]:
    """A job that waits for its dependencies, created and attached to them in the caller's
    transaction (it is not due: it takes no place in line, and its dispatch row waits)."""
    stored, handed = await create_job(conn, new, quotas, owner)
    if isinstance(stored, QuotaRefusal) or not stored[1]:
        return stored, handed
    job = stored[0]
    deps = new.dependencies
    attached, pending = await attach(conn, job.id, deps.job_ids, deps.policy, new.user_id)
    if attached != len(deps.job_ids):
        # a dependency was deleted (retention) since it was checked: nothing is written
        raise LookupError(f"{len(deps.job_ids) - attached} dependencies are gone")
    shown = replace(
        job,
        depends_on=list(deps.job_ids[:SHOWN_EDGES]),
        dependencies_total=attached,
        dependencies_pending=pending,
        dependency_policy=deps.policy.value,
    )
    return (shown, True), handed
