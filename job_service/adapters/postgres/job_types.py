"""Declared job type specs on PostgreSQL (the ``job_type_specs`` table)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
from google.protobuf import json_format

from job_service.ports.job_types import Declaration
from shared.pb.jobs.v1.job_type_pb2 import JobTypeSpec

_COLUMNS = "spec, first_declared_by, first_declared_at, last_declared_by, last_declared_at"

# The spec stored unless its pair is; else the stored one. (Within one snapshot: a pair a
# concurrent declaration stored after it began is seen by neither half; asked again.)
DECLARE = f"""
WITH inserted AS (
    INSERT INTO job_type_specs (job_type, version, spec, first_declared_by, last_declared_by)
    VALUES ($1, $2, $3, $4, $4)
    ON CONFLICT (job_type, version) DO NOTHING
    RETURNING {_COLUMNS}
)
SELECT {_COLUMNS}, true AS new FROM inserted
UNION ALL
SELECT {_COLUMNS}, false AS new FROM job_type_specs
WHERE job_type = $1 AND version = $2 AND NOT EXISTS (SELECT 1 FROM inserted)
"""

TOUCH = """
UPDATE job_type_specs SET last_declared_by = $3, last_declared_at = clock_timestamp()
WHERE job_type = $1 AND version = $2
"""

DECLARED_SINCE = f"""
SELECT {_COLUMNS} FROM job_type_specs
WHERE $1::timestamptz IS NULL OR first_declared_at > $1
ORDER BY first_declared_at, job_type, version
"""


class JobTypeRepository:
    """The ``JobTypeStore`` port on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def declare(self, spec: JobTypeSpec, worker_id: str) -> tuple[Declaration, bool]:
        document = json_format.MessageToDict(spec, preserving_proto_field_name=True)
        for _ in range(3):
            row = await self._pool.fetchrow(
                DECLARE, spec.job_type, spec.version, document, worker_id
            )
            if row is not None:
                return _declaration(row), bool(row["new"])
        raise RuntimeError("a job type spec was neither stored nor found")

    async def touch(self, job_type: str, version: str, worker_id: str) -> None:
        await self._pool.execute(TOUCH, job_type, version, worker_id)

    async def declared_since(self, since: datetime | None) -> list[Declaration]:
        return [_declaration(row) for row in await self._pool.fetch(DECLARED_SINCE, since)]


def _declaration(row: Any) -> Declaration:
    return Declaration(
        spec=json_format.ParseDict(row["spec"], JobTypeSpec(), ignore_unknown_fields=True),
        first_declared_by=row["first_declared_by"],
        first_declared_at=row["first_declared_at"],
        last_declared_by=row["last_declared_by"],
        last_declared_at=row["last_declared_at"],
    )
