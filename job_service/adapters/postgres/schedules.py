"""Schedules on PostgreSQL: the CRUD of ScheduleService, and the firing round's claim.

A firing round is one transaction: it locks the due schedules (``FOR UPDATE SKIP LOCKED``,
so replicas split them and never fire one together), creates each slot's job with
CreateJob's own statement on the same connection (the unit of work ``units.create_job``),
records the slot in ``schedule_runs`` and advances ``next_fire_at`` — all committed
together, or none of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg

from job_service.adapters.postgres.units import create_job
from job_service.domain.jobs import NewJob
from job_service.domain.lifecycle import TERMINAL, status_values
from job_service.domain.quotas import Quotas
from job_service.domain.schedules import (
    CatchUpMode,
    Cron,
    JobTemplate,
    OverlapPolicy,
    RunOutcome,
    Schedule,
    ScheduleRun,
    ScheduleSpec,
)
from job_service.domain.selection import Cursor
from job_service.ports.jobs import Stored
from shared.credentials import CredentialMode

_SPEC_COLUMNS = (
    "cron",
    "time_zone",
    "job_type",
    "input",
    "priority",
    "credential_mode",
    "credential_id",
    "target_type",
    "target_id",
    "overlap_policy",
    "catch_up_window_s",
    "catch_up_mode",
    "start_at",
    "end_at",
)
COLUMNS = (
    "id::text AS id, user_id, idempotency_key, request_hash, paused, next_fire_at,"
    " last_job_id::text AS last_job_id, created_at, updated_at,"
    " coalesce(updated_by, created_by) AS updated_by, cron, time_zone, job_type,"
    " input, priority, credential_mode, credential_id::text AS credential_id, target_type,"
    " target_id, overlap_policy, catch_up_window_s, catch_up_mode, start_at, end_at"
)
_SPEC_PARAMS = ", ".join(f"${n}" for n in range(7, 7 + len(_SPEC_COLUMNS)))

CREATE = f"""
INSERT INTO schedules (id, user_id, idempotency_key, request_hash, paused, next_fire_at,
                       {", ".join(_SPEC_COLUMNS)}, created_by)
VALUES ($1, $2, $3, $4, $5, $6, {_SPEC_PARAMS}, ${7 + len(_SPEC_COLUMNS)})
ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING {COLUMNS}
"""
FIND_BY_KEY = f"SELECT {COLUMNS} FROM schedules WHERE user_id = $1 AND idempotency_key = $2"
GET = f"SELECT {COLUMNS} FROM schedules WHERE id = $1 AND user_id = $2"
UPDATE = f"""
UPDATE schedules
SET ({", ".join(_SPEC_COLUMNS)}, request_hash, next_fire_at, updated_by, updated_at)
    = ({", ".join(f"${n}" for n in range(3, 3 + len(_SPEC_COLUMNS)))},
       ${3 + len(_SPEC_COLUMNS)}, ${4 + len(_SPEC_COLUMNS)}, ${5 + len(_SPEC_COLUMNS)}, now())
WHERE id = $1 AND user_id = $2
RETURNING {COLUMNS}
"""
SET_PAUSED = f"""
UPDATE schedules SET paused = $3, next_fire_at = $4, updated_by = $5, updated_at = now()
WHERE id = $1 AND user_id = $2
RETURNING {COLUMNS}
"""
DELETE = "DELETE FROM schedules WHERE id = $1 AND user_id = $2"
LIST = f"""
SELECT {COLUMNS} FROM schedules
WHERE user_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
ORDER BY created_at DESC, id DESC LIMIT $4
"""
RUNS = """
SELECT slot, outcome, job_id::text AS job_id, recorded_at, detail FROM schedule_runs
WHERE schedule_id = $1 ORDER BY slot DESC LIMIT $2
"""
CLAIM_DUE = f"""
SELECT {COLUMNS} FROM schedules
WHERE NOT paused AND next_fire_at <= $1
ORDER BY next_fire_at
LIMIT $2
FOR UPDATE SKIP LOCKED
"""
NEXT_DUE = "SELECT min(next_fire_at) FROM schedules WHERE NOT paused"
LOCK_ONE = f"SELECT {COLUMNS} FROM schedules WHERE id = $1 AND user_id = $2 FOR UPDATE"
# recorded_at is the time of the write (clock_timestamp, not the round's start): a run's
# recorded_at - slot is its fire lag up to the commit that follows
RECORD_RUN = """
INSERT INTO schedule_runs (schedule_id, slot, outcome, job_id, detail, recorded_at)
SELECT $1, unnest($2::timestamptz[]), $3, $4, $5, clock_timestamp()
ON CONFLICT (schedule_id, slot) DO NOTHING
"""
ADVANCE = """
UPDATE schedules SET next_fire_at = $2, last_job_id = coalesce($3, last_job_id),
    updated_at = now()
WHERE id = $1
"""
JOB_UNFINISHED = "SELECT status <> ALL($2::text[]) FROM jobs WHERE id = $1"
# A round's statements are short: the hot path's statement timeout, for the round only (the
# pool it runs on has none), so that a stalled statement does not hold the due schedules.
ROUND_STATEMENT_TIMEOUT = "SELECT set_config('statement_timeout', $1, true)"
_TERMINAL = status_values(TERMINAL)
# Runs past this age are pruned (a 1-second schedule records 86,400 a day).
PRUNE_RUNS = """
DELETE FROM schedule_runs WHERE ctid IN (
    SELECT ctid FROM schedule_runs WHERE recorded_at < now() - $1 * interval '1 second'
    LIMIT $2
)
"""


def _spec_values(spec: ScheduleSpec) -> list[Any]:
    t = spec.template
    return [
        spec.cron.expression,
        spec.cron.zone,
        t.job_type,
        t.input,
        t.priority,
        t.credential_mode.value,
        t.credential_id or None,
        t.target_type or None,
        t.target_id or None,
        spec.overlap.value,
        spec.catch_up_window_s,
        spec.catch_up.value,
        spec.start_at,
        spec.end_at,
    ]


def schedule_from_row(row: asyncpg.Record) -> Schedule:
    spec = ScheduleSpec(
        # stored only after Cron.parse accepted it
        cron=Cron(row["cron"], row["time_zone"]),
        template=JobTemplate(
            job_type=row["job_type"],
            input=row["input"],
            priority=row["priority"],
            credential_mode=CredentialMode(row["credential_mode"]),
            credential_id=row["credential_id"] or "",
            target_type=row["target_type"] or "",
            target_id=row["target_id"] or "",
        ),
        overlap=OverlapPolicy(row["overlap_policy"]),
        catch_up_window_s=row["catch_up_window_s"],
        catch_up=CatchUpMode(row["catch_up_mode"]),
        start_at=row["start_at"],
        end_at=row["end_at"],
    )
    return Schedule(
        id=row["id"],
        user_id=row["user_id"],
        spec=spec,
        paused=row["paused"],
        idempotency_key=row["idempotency_key"],
        request_hash=row["request_hash"],
        next_fire_at=row["next_fire_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_job_id=row["last_job_id"],
        updated_by=row["updated_by"],
    )


class FiringRound:
    """The due schedules one transaction holds locked, and what the round writes."""

    def __init__(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        schedules: list[Schedule],
    ) -> None:
        self._conn = conn
        self.schedules = schedules

    async def create_job(self, new: NewJob, quotas: Quotas) -> Stored:
        """CreateJob's statement (quotas, snapshot, timeline, dispatch row), in the round:
        its dispatch row is claimed once the round commits (nothing to hand over)."""
        stored, _ = await create_job(self._conn, new, quotas)
        return stored

    async def unfinished(self, job_id: str) -> bool:
        """The job exists and has not finished."""
        return bool(await self._conn.fetchval(JOB_UNFINISHED, job_id, _TERMINAL))

    async def record(
        self,
        schedule_id: str,
        slots: Sequence[datetime],
        outcome: RunOutcome,
        job_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        if slots:
            await self._conn.execute(
                RECORD_RUN, schedule_id, list(slots), outcome.value, job_id, detail
            )

    async def advance(
        self, schedule_id: str, next_fire_at: datetime | None, last_job_id: str | None
    ) -> None:
        await self._conn.execute(ADVANCE, schedule_id, next_fire_at, last_job_id)

    @asynccontextmanager
    async def isolated(self) -> AsyncIterator[None]:
        """A savepoint: one schedule's failure rolls back its own writes only."""
        async with self._conn.transaction():
            yield


class ScheduleRepository:
    """Schedules and their runs on one asyncpg pool; each statement of a firing round's
    transaction is cancelled past ``round_statement_timeout_s`` (0: the pool's own
    timeout)."""

    def __init__(self, pool: asyncpg.Pool, *, round_statement_timeout_s: float = 0) -> None:
        self._pool = pool
        self._round_timeout = str(round(round_statement_timeout_s * 1000))

    async def create(
        self,
        schedule_id: str,
        user_id: str,
        spec: ScheduleSpec,
        *,
        idempotency_key: str | None,
        request_hash: str,
        paused: bool,
        next_fire_at: datetime | None,
        created_by: str | None,
    ) -> tuple[Schedule, bool]:
        """The schedule stored (True), or the one the idempotency key names (False)."""
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                CREATE,
                schedule_id,
                user_id,
                idempotency_key,
                request_hash,
                paused,
                next_fire_at,
                *_spec_values(spec),
                created_by,
            )
            if row is not None:
                return schedule_from_row(row), True
            existing = await conn.fetchrow(FIND_BY_KEY, user_id, idempotency_key)
        assert existing is not None, "ON CONFLICT waited for the key's writer to commit"
        return schedule_from_row(existing), False

    async def get(self, schedule_id: str, user_id: str) -> Schedule | None:
        row = await self._pool.fetchrow(GET, schedule_id, user_id)
        return None if row is None else schedule_from_row(row)

    async def runs(self, schedule_id: str, limit: int) -> list[ScheduleRun]:
        rows = await self._pool.fetch(RUNS, schedule_id, limit)
        return [
            ScheduleRun(
                slot=r["slot"],
                outcome=RunOutcome(r["outcome"]),
                job_id=r["job_id"],
                recorded_at=r["recorded_at"],
                detail=r["detail"],
            )
            for r in rows
        ]

    async def list(self, user_id: str, after: Cursor | None, limit: int) -> list[Schedule]:
        rows = await self._pool.fetch(
            LIST,
            user_id,
            after.created_at if after else None,
            after.id if after else None,
            limit,
        )
        return [schedule_from_row(r) for r in rows]

    async def update(
        self,
        schedule_id: str,
        user_id: str,
        spec: ScheduleSpec,
        request_hash: str,
        next_fire_at: datetime | None,
        by: str | None = None,
    ) -> Schedule | None:
        row = await self._pool.fetchrow(
            UPDATE, schedule_id, user_id, *_spec_values(spec), request_hash, next_fire_at, by
        )
        return None if row is None else schedule_from_row(row)

    async def set_paused(
        self,
        schedule_id: str,
        user_id: str,
        paused: bool,
        next_fire_at: datetime | None,
        by: str | None = None,
    ) -> Schedule | None:
        row = await self._pool.fetchrow(SET_PAUSED, schedule_id, user_id, paused, next_fire_at, by)
        return None if row is None else schedule_from_row(row)

    async def delete(self, schedule_id: str, user_id: str) -> bool:
        status = await self._pool.execute(DELETE, schedule_id, user_id)
        return bool(status.endswith(" 1"))

    async def next_due(self) -> datetime | None:
        """The earliest next slot of any schedule that is not paused."""
        due: datetime | None = await self._pool.fetchval(NEXT_DUE)
        return due

    @asynccontextmanager
    async def due(self, now: datetime, limit: int) -> AsyncIterator[FiringRound]:
        """A firing round over up to ``limit`` schedules due at ``now`` that no other round
        holds; committed when the block ends without an error."""
        async with self._pool.acquire() as conn, conn.transaction():
            if self._round_timeout != "0":
                await conn.execute(ROUND_STATEMENT_TIMEOUT, self._round_timeout)
            rows = await conn.fetch(CLAIM_DUE, now, limit)
            yield FiringRound(conn, [schedule_from_row(r) for r in rows])

    @asynccontextmanager
    async def one(self, schedule_id: str, user_id: str) -> AsyncIterator[FiringRound]:
        """A round over one user's schedule (TriggerSchedule), waiting for its lock; no
        schedules when there is no such schedule."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(LOCK_ONE, schedule_id, user_id)
            schedules = [] if row is None else [schedule_from_row(row)]
            yield FiringRound(conn, schedules)

    async def prune_runs(self, older_than_s: float, limit: int) -> int:
        status = await self._pool.execute(PRUNE_RUNS, older_than_s, limit)
        return int(status.split()[-1])
