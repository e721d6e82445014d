"""The backfill of rows written before encryption, on PostgreSQL: each payload column's
plaintext rows (a JSON column's sealed value is a JSON string, a step's text starts with
``sealed:v1:``), read a batch at a time with their job's user, and sealed by a
compare-and-set on the value read. A snapshot's content hash and its job's request hash
are keyed in the same statement (a job whose input is plaintext was created before
encryption, so both are plain hashes)."""

from __future__ import annotations

from typing import Any

import asyncpg

from job_service.domain.envelopes import (
    INPUT,
    INTERNAL_ERROR,
    OUTPUT,
    SCHEDULE_INPUT,
    SEALED_TEXT,
    artifact_field,
    signal_field,
    step_field,
)
from job_service.ports.backfill import PlainRow

SNAPSHOTS, OUTPUTS, ARTIFACTS, STEPS = "job_snapshots", "jobs", "job_artifacts", "job_steps"
SIGNALS, SCHEDULES = "job_signals", "schedules"
ERRORS = "jobs.internal_error_message"

_PLAIN = {
    SNAPSHOTS: "jsonb_typeof(s.payload) <> 'string'",
    OUTPUTS: "j.validated_output IS NOT NULL AND jsonb_typeof(j.validated_output) <> 'string'",
    ARTIFACTS: "jsonb_typeof(a.payload) <> 'string'",
    STEPS: f"left(t.response_text, {len(SEALED_TEXT)}) <> '{SEALED_TEXT}'",
    SIGNALS: "jsonb_typeof(g.payload) <> 'string'",
    SCHEDULES: "jsonb_typeof(c.input) <> 'string'",
    ERRORS: f"j.internal_error_message <> ''"
    f" AND left(j.internal_error_message, {len(SEALED_TEXT)}) <> '{SEALED_TEXT}'",
}
PLAIN_SNAPSHOTS = f"""
SELECT s.job_id::text AS job_id, j.user_id, s.payload, s.content_hash, j.request_hash
FROM job_snapshots s JOIN jobs j ON j.id = s.job_id WHERE {_PLAIN[SNAPSHOTS]} LIMIT $1
"""
PLAIN_OUTPUTS = f"""
SELECT j.id::text AS job_id, j.user_id, j.validated_output FROM jobs j
WHERE {_PLAIN[OUTPUTS]} LIMIT $1
"""
PLAIN_ARTIFACTS = f"""
SELECT a.id, a.job_id::text AS job_id, j.user_id, a.artifact_type, a.artifact_id, a.payload
FROM job_artifacts a JOIN jobs j ON j.id = a.job_id WHERE {_PLAIN[ARTIFACTS]} LIMIT $1
"""
PLAIN_STEPS = f"""
SELECT t.job_id::text AS job_id, t.step, j.user_id, t.response_text, t.response_parsed
FROM job_steps t JOIN jobs j ON j.id = t.job_id WHERE {_PLAIN[STEPS]} LIMIT $1
"""
PLAIN_SIGNALS = f"""
SELECT g.job_id::text AS job_id, g.seq, g.name, j.user_id, g.payload
FROM job_signals g JOIN jobs j ON j.id = g.job_id WHERE {_PLAIN[SIGNALS]} LIMIT $1
"""
PLAIN_SCHEDULES = f"""
SELECT c.id::text AS id, c.user_id, c.input FROM schedules c WHERE {_PLAIN[SCHEDULES]} LIMIT $1
"""
PLAIN_ERRORS = f"""
SELECT j.id::text AS job_id, j.user_id, j.internal_error_message FROM jobs j
WHERE {_PLAIN[ERRORS]} LIMIT $1
"""
COUNT_PLAIN = {
    SNAPSHOTS: f"SELECT count(*) FROM job_snapshots s WHERE {_PLAIN[SNAPSHOTS]}",
    OUTPUTS: f"SELECT count(*) FROM jobs j WHERE {_PLAIN[OUTPUTS]}",
    ARTIFACTS: f"SELECT count(*) FROM job_artifacts a WHERE {_PLAIN[ARTIFACTS]}",
    STEPS: f"SELECT count(*) FROM job_steps t WHERE {_PLAIN[STEPS]}",
    SIGNALS: f"SELECT count(*) FROM job_signals g WHERE {_PLAIN[SIGNALS]}",
    SCHEDULES: f"SELECT count(*) FROM schedules c WHERE {_PLAIN[SCHEDULES]}",
    ERRORS: f"SELECT count(*) FROM jobs j WHERE {_PLAIN[ERRORS]}",
}
SEAL_SNAPSHOT = """
WITH sealed AS (
    UPDATE job_snapshots SET payload = $2, content_hash = $4
    WHERE job_id = $1 AND payload = $3
    RETURNING job_id
)
UPDATE jobs SET request_hash = $5 FROM sealed WHERE jobs.id = sealed.job_id RETURNING 1
"""
SEAL_OUTPUT = "UPDATE jobs SET validated_output = $2 WHERE id = $1 AND validated_output = $3"
SEAL_ARTIFACT = "UPDATE job_artifacts SET payload = $2 WHERE id = $1 AND payload = $3"
SEAL_SIGNAL = "UPDATE job_signals SET payload = $3 WHERE job_id = $1 AND seq = $2 AND payload = $4"
SEAL_ERROR = """
UPDATE jobs SET internal_error_message = $2 WHERE id = $1 AND internal_error_message = $3
"""
SEAL_SCHEDULE = "UPDATE schedules SET input = $2 WHERE id = $1 AND input = $3"
SEAL_STEP = """
UPDATE job_steps SET response_text = $3, response_parsed = NULL
WHERE job_id = $1 AND step = $2 AND response_text = $4
  AND response_parsed IS NOT DISTINCT FROM $5
"""


class BackfillRepository:
    """The BackfillStore on one asyncpg pool (jsonb as Python values)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @property
    def tables(self) -> tuple[str, ...]:
        return (SNAPSHOTS, OUTPUTS, ARTIFACTS, STEPS, SIGNALS, SCHEDULES, ERRORS)

    async def plain(self, table: str, limit: int) -> list[PlainRow]:
        if table == SNAPSHOTS:
            rows = await self._pool.fetch(PLAIN_SNAPSHOTS, limit)
            return [
                PlainRow(
                    table,
                    (r["job_id"],),
                    r["job_id"],
                    r["user_id"],
                    INPUT,
                    r["payload"],
                    r["content_hash"],
                    r["request_hash"],
                )
                for r in rows
            ]
        if table == OUTPUTS:
            rows = await self._pool.fetch(PLAIN_OUTPUTS, limit)
            return [
                PlainRow(table, (r["job_id"],), r["job_id"], r["user_id"], OUTPUT, r[2])
                for r in rows
            ]
        if table == ARTIFACTS:
            rows = await self._pool.fetch(PLAIN_ARTIFACTS, limit)
            return [
                PlainRow(
                    table,
                    (r["id"],),
                    r["job_id"],
                    r["user_id"],
                    artifact_field(r["artifact_type"], r["artifact_id"]),
                    r["payload"],
                )
                for r in rows
            ]
        if table == ERRORS:
            rows = await self._pool.fetch(PLAIN_ERRORS, limit)
            return [
                PlainRow(table, (r["job_id"],), r["job_id"], r["user_id"], INTERNAL_ERROR, r[2])
                for r in rows
            ]
        if table == SCHEDULES:
            rows = await self._pool.fetch(PLAIN_SCHEDULES, limit)
            return [
                PlainRow(table, (r["id"],), r["id"], r["user_id"], SCHEDULE_INPUT, r["input"])
                for r in rows
            ]
        if table == SIGNALS:
            rows = await self._pool.fetch(PLAIN_SIGNALS, limit)
            return [
                PlainRow(
                    table,
                    (r["job_id"], r["seq"]),
                    r["job_id"],
                    r["user_id"],
                    signal_field(r["name"]),
                    r["payload"],
                )
                for r in rows
            ]
        rows = await self._pool.fetch(PLAIN_STEPS, limit)
        return [
            PlainRow(
                table,
                (r["job_id"], r["step"]),
                r["job_id"],
                r["user_id"],
                step_field(r["step"]),
                [r["response_text"], r["response_parsed"]],
            )
            for r in rows
        ]

    async def seal(self, row: PlainRow, sealed: Any, content_hash: str, request_hash: str) -> bool:
        if row.table == SNAPSHOTS:
            done = await self._pool.fetchval(
                SEAL_SNAPSHOT, row.bound_to, sealed, row.value, content_hash, request_hash
            )
            return done is not None
        if row.table == STEPS:
            text, parsed = row.value
            status = await self._pool.execute(SEAL_STEP, *row.key, sealed, text, parsed)
        elif row.table == ERRORS:
            status = await self._pool.execute(SEAL_ERROR, *row.key, sealed, row.value)
        elif row.table == SCHEDULES:
            status = await self._pool.execute(SEAL_SCHEDULE, *row.key, sealed, row.value)
        elif row.table == SIGNALS:
            status = await self._pool.execute(SEAL_SIGNAL, *row.key, sealed, row.value)
        elif row.table == OUTPUTS:
            status = await self._pool.execute(SEAL_OUTPUT, *row.key, sealed, row.value)
        else:
            status = await self._pool.execute(SEAL_ARTIFACT, *row.key, sealed, row.value)
        return bool(status != "UPDATE 0")

    async def count_plain(self, table: str) -> int:
        return int(await self._pool.fetchval(COUNT_PLAIN[table]))
