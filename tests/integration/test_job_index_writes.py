"""Migration 0026 (fewer index entries per job, issue 28): it downgrades to the indexes it
replaced and upgrades again, and on a filled table every statement that read a dropped or
narrowed index still reads an index (docs/benchmarks.md, round 6, has the plans)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
from alembic import command

from job_service.adapters.postgres.gauges import QUEUE_DEPTH
from job_service.adapters.postgres.migrations import alembic_config
from job_service.adapters.postgres.queues import QUEUES
from job_service.adapters.postgres.results import JOIN_CREATED
from job_service.adapters.postgres.units import CANCEL_DESCENDANTS
from job_service.adapters.postgres.vocabulary.filters import filter_conditions
from job_service.domain.lifecycle import UNFINISHED, JobStatus, status_values
from job_service.domain.selection import JobFilter

INDEXES = "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY($1::text[])"
TOUCHED = ["jobs_parent", "jobs_user_active", "jobs_queue_status_created"]
ACTIVE = "ANY ((ARRAY[" + ", ".join(
    f"'{s}'::character varying" for s in ("created", "queued", "running", "retrying")
)
AT_0025 = {
    "jobs_parent": "CREATE INDEX jobs_parent ON public.jobs USING btree (parent_job_id)",
    "jobs_user_active": "CREATE INDEX jobs_user_active ON public.jobs USING btree (user_id) "
    f"WHERE ((status)::text = {ACTIVE}, 'cancel_requested'::character varying])::text[]))",
    "jobs_queue_status_created": "CREATE INDEX jobs_queue_status_created ON public.jobs "
    "USING btree (queue, status, created_at)",
}
AT_0026 = {
    "jobs_parent": "CREATE INDEX jobs_parent ON public.jobs USING btree (parent_job_id) "
    "WHERE (parent_job_id IS NOT NULL)",
    "jobs_user_active": "CREATE INDEX jobs_user_active ON public.jobs USING btree "
    f"(user_id, queue, status) WHERE ((status)::text = {ACTIVE}, "
    "'cancel_requested'::character varying])::text[]))",
}

# 20,000 jobs of 200 users in two queues, a tenth of them unfinished, one in fifty a child.
FILL = """
INSERT INTO jobs (user_id, job_type, queue, request_hash, status, max_attempts, timeout_ms,
                  input_schema_version, output_schema_version, definition_version,
                  parent_job_id, created_at, finished_at, sched_key)
SELECT 'user-' || (i % 200), 'synthetic', CASE WHEN i % 3 = 0 THEN 'batch' ELSE 'interactive' END,
       md5(i::text), CASE WHEN i % 10 = 0 THEN 'queued' WHEN i % 97 = 0 THEN 'failed'
                          ELSE 'succeeded' END,
       3, 1000, '1', '1', '1', NULL, now() - i * interval '1 minute',
       CASE WHEN i % 10 <> 0 THEN now() - i * interval '1 minute' END, i
FROM generate_series(1, 20000) i
"""
CHILDREN = """
UPDATE jobs SET parent_job_id = p.id
FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM jobs) p,
     (SELECT id, row_number() OVER (ORDER BY id DESC) AS n FROM jobs) c
WHERE jobs.id = c.id AND p.n = c.n AND c.n % 50 = 0
"""


async def _indexes(url: str) -> dict[str, str]:
    conn = await asyncpg.connect(url)
    try:
        return dict(await conn.fetch(INDEXES, TOUCHED))  # type: ignore[arg-type]
    finally:
        await conn.close()


async def test_0026_downgrades_to_the_indexes_it_replaced_and_upgrades_again(
    database_url: str,
) -> None:
    config = alembic_config(database_url)
    assert await _indexes(database_url) == AT_0026

    await asyncio.to_thread(command.downgrade, config, "0025")
    assert await _indexes(database_url) == AT_0025

    await asyncio.to_thread(command.upgrade, config, "head")
    assert await _indexes(database_url) == AT_0026


def _scans(plan: Any) -> list[str]:
    """The indexes of ``jobs`` a JSON plan reads (a bitmap scan's too), and its other scans
    of ``jobs`` by node type ("Seq Scan", or the "Bitmap Heap Scan" after an index)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("Index Name", "").startswith("jobs_"):  # a bitmap's too
                found.append(node["Index Name"])
            elif node.get("Relation Name") == "jobs" and "Index Name" not in node:
                found.append(node["Node Type"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(plan))
    return found


async def test_what_read_the_replaced_indexes_reads_an_index_on_a_filled_table(
    db: asyncpg.Connection,
) -> None:
    await db.execute(FILL)
    await db.execute(CHILDREN)
    await db.execute("VACUUM (ANALYZE) jobs")
    parent = await db.fetchval("SELECT parent_job_id FROM jobs WHERE parent_job_id IS NOT NULL")
    listed: list[Any] = []
    # ListJobs' page query (listing.py), by queue and status
    where = filter_conditions(JobFilter(queue="batch", status=JobStatus.FAILED), listed)
    plans: dict[str, tuple[str, list[Any]]] = {
        "queue depth": (QUEUE_DEPTH, [status_values(UNFINISHED)]),
        "queues": (QUEUES, [["interactive", "batch"]]),
        "quota": (
            "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE user_id = $1 AND status IN"
            " ('created', 'queued', 'running', 'retrying', 'cancel_requested') LIMIT 100) a",
            ["user-7"],
        ),
        "children": ("SELECT count(*) FROM jobs c WHERE c.parent_job_id = $1::uuid", [parent]),
        "cancel descendants": (
            CANCEL_DESCENDANTS,
            [[parent], json.dumps({"queued": "cancelled"}), "JOB_CANCELLED", "cancelled"],
        ),
        "join created": (JOIN_CREATED, [parent, "synthetic", "k"]),
        "listing by queue and status": (
            f"SELECT j.id FROM jobs j WHERE {' AND '.join(where)}"
            " ORDER BY j.created_at DESC, j.id DESC LIMIT 50",
            listed,
        ),
    }
    scans = {}
    for name, (sql, args) in plans.items():  # EXPLAIN without ANALYZE: nothing runs
        scans[name] = _scans(await db.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args))

    assert {name: "Seq Scan" in found for name, found in scans.items()} == dict.fromkeys(
        plans, False
    ), scans
    assert "jobs_user_active" in scans["queue depth"]
    assert scans["quota"] == ["jobs_user_active"]
    assert scans["children"] == ["jobs_parent"]
