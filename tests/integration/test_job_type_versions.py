"""Issue 41, done when: a v2 spec beside v1 keeps v1 jobs on v1 workers — a rolling
upgrade. Worker A declares job type X version "1" and jobs are created pinned to it; worker
B declares X version "2" (another spec: another timeout) and the jobs created from then on
are pinned to "2" with its spec. With only B running, the v1 jobs wait ("no live worker
runs X@1") while B runs the v2 ones; once A is back, A runs the v1 jobs, and neither worker
ever runs the other's version."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import asyncpg
import pytest

from job_service.app import JobServiceApp
from jobtypes import synthetic
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_pb2
from shared.registry import Registry
from tests.support.stack import Client, open_channel, settings, worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp

V1 = dataclasses.replace(synthetic.DEFINITION, job_type="rolling", version="1", timeout_s=30.0)
V2 = dataclasses.replace(V1, version="2", timeout_s=20.0)
JOBS = 4
# ~5 s: the v1 jobs' dispatches, offered to B and handed back, come round again to A
pytestmark = pytest.mark.slow
RUNS = """
SELECT j.id::text AS id, j.definition_version, j.timeout_ms, j.status::text, j.locked_by,
       array_agg(DISTINCT e.worker_id) FILTER (WHERE e.worker_id IS NOT NULL) AS workers
FROM jobs j LEFT JOIN job_events e ON e.job_id = j.id
WHERE j.id = ANY($1::uuid[])
GROUP BY j.id
"""


async def test_v2_beside_v1_keeps_v1_jobs_on_v1_workers(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    async with JobServiceApp(settings(database_url, nats_url)) as app:
        target = f"127.0.0.1:{app.port}"
        a = worker_settings(nats_url, target, worker_id="worker-a")
        b = worker_settings(nats_url, target, worker_id="worker-b")
        async with open_channel(target) as channel:
            client = Client(channel)
            # worker A declares X@1 and stops (the jobs wait for it); it claims nothing
            # meanwhile, not even ahead, so no live worker runs X@1 until it is back
            declaring = worker_settings(
                nats_url, target, worker_id="worker-a", worker_grants_ahead=False
            )
            async with WorkerApp(declaring, Registry([V1])):
                pass
            old = [(await client.create(job_type="rolling")).job for _ in range(JOBS)]
            assert {j.definition_version for j in old} == {"1"}

            async with WorkerApp(b, Registry([V2])):
                new = [(await client.create(job_type="rolling")).job for _ in range(JOBS)]
                assert {j.definition_version for j in new} == {"2"}
                await eventually(
                    lambda: _all(db, new, "succeeded"), timeout=20, message="B ran not its jobs"
                )
                # B offered the v1 jobs (one queue, one stream) and took none
                assert await _all(db, old, "queued")
                hold = (
                    await client.admin.GetJob(apb.AdminGetJobRequest(job_id=old[0].id))
                ).job.hold
                assert (hold.reason, hold.key) == (
                    job_pb2.JobHold.REASON_NO_WORKER_FOR_VERSION,
                    "rolling@1",
                )

                # A back beside B: both take work from the same queue, each its version
                async with WorkerApp(a, Registry([V1])):
                    more = [(await client.create(job_type="rolling")).job for _ in range(JOBS)]
                    await eventually(
                        lambda: _all(db, [*old, *more], "succeeded"),
                        timeout=20,
                        message="the v1 jobs did not run once A was back",
                    )

    runs = {r["id"]: r for r in await db.fetch(RUNS, [j.id for j in [*old, *new, *more]])}
    for job in old:
        assert _ran(runs[job.id]) == ("1", V1.timeout_s * 1000, "worker-a")
    for job in [*new, *more]:
        assert _ran(runs[job.id]) == ("2", V2.timeout_s * 1000, "worker-b")
    declared = await db.fetch(
        "SELECT version, first_declared_by FROM job_type_specs WHERE job_type = 'rolling'"
        " ORDER BY version"
    )
    assert [tuple(r) for r in declared] == [("1", "worker-a"), ("2", "worker-b")]


async def _all(db: asyncpg.Connection, jobs: Iterable[job_pb2.Job], status: str) -> bool:
    statuses = await db.fetch(
        "SELECT status::text FROM jobs WHERE id = ANY($1::uuid[])", [j.id for j in jobs]
    )
    return {r["status"] for r in statuses} == {status}


def _ran(row: asyncpg.Record) -> tuple[str, float, str]:
    """The job's version and timeout, and the one worker that ran it (every step of it)."""
    [worker] = row["workers"]
    assert row["locked_by"] in (None, worker)
    return row["definition_version"], row["timeout_ms"], worker
