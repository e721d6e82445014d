"""The engine's per-job stage timestamps in a benchmark's steady phase: the database's own
(created, dispatch row claimed and published, granted, result written) joined with the
workers' (``worker_service/stage_times.py``: grant received — pushed down the session or
answered to LockJobs for a fetched token —, attempt started, result sent), each as ms since
the job's create, p50 and p99 over the phase's jobs."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

import asyncpg

ENV = "JOBS_STAGE_TIMES_DIR"

DATABASE_STAGES = """
SELECT j.id::text AS id, extract(epoch FROM j.created_at) AS created,
       extract(epoch FROM o.locked_at) AS claimed,
       extract(epoch FROM o.published_at) AS published,
       extract(epoch FROM j.locked_at) AS granted,
       extract(epoch FROM j.finished_at) AS done
FROM jobs j LEFT JOIN outbox_events o ON o.dedupe_key = 'job.dispatch:' || j.id || ':create'
WHERE j.id = ANY($1::uuid[])
"""

DATABASE_COLUMNS = frozenset({"claimed", "published", "granted", "done"})
# (column or worker stage, label), in the order a job passes them
STAGES = [
    ("claimed", "dispatch row claimed (0: written claimed by CreateJob)"),
    ("granted", "granted (jobs.locked_at: pushed or LockJobs)"),
    ("published", "dispatch row marked (pushed or NATS acked)"),
    ("pushed", "worker: pushed grant received"),
    ("locked", "worker: fetched token's LockJobs answered"),
    ("started", "worker: attempt started"),
    ("submitted", "worker: SubmitResults sent"),
    ("done", "result written (jobs.finished_at)"),
]


def worker_times(directory: Path) -> dict[str, dict[str, float]]:
    """job id → stage → the first time a worker recorded it (a later attempt's are later)."""
    times: dict[str, dict[str, float]] = {}
    for path in directory.glob("stages-*.tsv"):
        for line in path.read_text().splitlines():
            job_id, stage, at = line.split("\t")
            stages = times.setdefault(job_id, {})
            stages.setdefault(stage, float(at))
    return times


async def stage_table(
    db: asyncpg.Connection, ids: Sequence[object], directory: Path | None
) -> list[tuple[str, float, float, int]]:
    """(label, p50 ms, p99 ms, jobs that passed the stage) per stage."""
    rows = await db.fetch(DATABASE_STAGES, ids)
    workers = worker_times(directory) if directory is not None else {}
    table = []
    for stage, label in STAGES:
        values = []
        for r in rows:
            at = r[stage] if stage in DATABASE_COLUMNS else workers.get(r["id"], {}).get(stage)
            if at is not None:
                values.append((float(at) - float(r["created"])) * 1000)
        p50, p99 = p50_p99(values)
        table.append((label, p50, p99, len(values)))
    return table


def p50_p99(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    cuts = statistics.quantiles(sorted(values), n=100)
    return cuts[49], cuts[98]
