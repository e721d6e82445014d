"""Migration 0017 on a database that already holds retries: each retry is given the
original of its lineage, and parallel live retries of one original made before the rule
(which the new unique index would refuse) are split so that the index can be built."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from devstack.embedded import create_database, drop_database, with_database
from job_service.adapters.postgres.migrations import upgrade

INSERT = """
INSERT INTO jobs (id, user_id, job_type, queue, request_hash, status, max_attempts,
                  timeout_ms, input_schema_version, output_schema_version,
                  definition_version, retried_from_job_id, created_at)
VALUES ($1, 'u', 'synthetic', 'interactive', 'h', $2, 3, 1000, '1', '1', '1', $3,
        now() + $4 * interval '1 second')
"""


@pytest.fixture
async def at_0016(pg_admin_url: str) -> AsyncIterator[str]:
    name = f"lineage_{uuid.uuid4().hex[:12]}"
    await create_database(pg_admin_url, name)
    url = with_database(pg_admin_url, name)
    await asyncio.to_thread(upgrade, url, "0016")
    yield url
    await drop_database(pg_admin_url, name)


async def test_existing_retries_get_their_original_and_parallel_live_ones_are_split(
    at_0016: str,
) -> None:
    names = ("o", "r1", "r2", "p", "p1", "p2", "alone", "gone", "g1", "g2")
    ids = {name: str(uuid.uuid4()) for name in names}
    rows = [
        ("o", "failed", None),
        ("r1", "failed", "o"),  # a retry of the original
        ("r2", "queued", "r1"),  # a retry of the retry: the original's lineage
        ("p", "cancelled", None),
        ("p1", "queued", "p"),  # two live retries of one original (before the rule)
        ("p2", "succeeded", "p"),
        ("alone", "failed", None),
        ("g1", "failed", "gone"),  # retries of an original retention deleted
        ("g2", "queued", "g1"),
    ]
    conn = await asyncpg.connect(at_0016)
    try:
        for n, (name, status, source) in enumerate(rows):
            await conn.execute(INSERT, ids[name], status, ids[source] if source else None, float(n))
    finally:
        await conn.close()

    await asyncio.to_thread(upgrade, at_0016)

    conn = await asyncpg.connect(at_0016)
    try:
        found = {
            r["id"]: r["root"]
            for r in await conn.fetch("SELECT id::text, retry_root_id::text AS root FROM jobs")
        }
    finally:
        await conn.close()
    by_id = {v: k for k, v in ids.items()}
    roots = {by_id[i]: by_id.get(root) if root else None for i, root in found.items()}
    assert roots == {
        "o": None,
        "r1": "o",
        "r2": "o",
        "p": None,
        "p1": "p",  # the oldest live retry keeps the lineage
        "p2": "p2",  # the other one becomes an original of its own
        "alone": None,
        "g1": "gone",  # the original is kept by id, as a retry made now keeps it
        "g2": "gone",
    }
