"""The scheduler end to end: worker processes consuming work tokens, job_service replicas
deciding what each token grants. What is asserted is what the database records: when each
job started and finished, and (sampled every 10 ms) what ran at once."""

from __future__ import annotations

import asyncio
import signal
import statistics
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client import REGISTRY

from job_service.app import JobServiceApp
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import default_registry
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.wait import eventually

SCHED_MODULES = {"JOBS_JOB_TYPE_MODULES": "tests.support.sched_jobtypes"}


@asynccontextmanager
async def service(
    database_url: str, nats_url: str, **overrides: Any
) -> AsyncIterator[tuple[JobServiceApp, Client]]:
    registry = default_registry(SCHED_MODULES)
    no_quotas = {"max_active_jobs_per_user": 0, "daily_job_quota_per_user": 0}
    async with (
        running_job_service(database_url, nats_url, registry, **no_quotas, **overrides) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield app, Client(channel)


@pytest.fixture
def workers(tmp_path: Path, nats_url: str) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def spawn(worker_id: str, target: str, **env: str) -> WorkerProcess:
        process = WorkerProcess(tmp_path, worker_id, nats_url, target, **SCHED_MODULES, **env)
        started.append(process)
        return process

    yield spawn
    for process in started:
        process.close()


async def create_many(
    client: Client, count: int, *, user: str, job_type: str = "synthetic", **fields: Any
) -> list[str]:
    """``count`` jobs, created concurrently (a hundred calls in flight), in order."""
    job_input = struct_from_dict(fields.pop("job_input", {}))
    ids: list[str] = []
    for start in range(0, count, 100):
        responses = await asyncio.gather(
            *(
                client.jobs.CreateJob(
                    jpb.CreateJobRequest(user_id=user, job_type=job_type, input=job_input, **fields)
                )
                for _ in range(start, min(count, start + 100))
            )
        )
        ids += [r.job.id for r in responses]
    return ids


async def all_finished(db: asyncpg.Connection, ids: list[str]) -> bool:
    done = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE id = ANY($1::text[]::uuid[]) AND status = 'succeeded'",
        ids,
    )
    return bool(done == len(ids))


async def test_high_priority_jobs_created_after_a_backlog_start_before_it(
    database_url: str, nats_url: str, db: asyncpg.Connection, workers: Callable[..., WorkerProcess]
) -> None:
    async with service(database_url, nats_url) as (app, client):
        low = await create_many(client, 800, user="u1", priority=0)
        high = await create_many(client, 20, user="u1", priority=5)
        for n in range(2):
            workers(f"w{n}", f"127.0.0.1:{app.port}")
        await eventually(lambda: all_finished(db, low + high), timeout=120, interval=0.5)

    started = await db.fetch("SELECT id::text AS id FROM jobs ORDER BY started_at, id")
    order = [r["id"] for r in started]
    last_high = max(order.index(job_id) for job_id in high)
    lows_before = len(set(order[:last_high]) & set(low))
    assert lows_before < 0.9 * len(low), f"{lows_before} low jobs started before the last high"
    # the dispatch messages named the low jobs first: the database chose the order
    assert lows_before < 100


async def test_a_low_priority_job_is_overtaken_only_within_the_aging_bound(
    database_url: str, nats_url: str, db: asyncpg.Connection, workers: Callable[..., WorkerProcess]
) -> None:
    """Under a high-priority load larger than the fleet serves, a priority-0 job still
    runs, and no job created more than (priority gap x step) after it starts before it."""
    step_s, gap = 0.5, 4
    async with service(database_url, nats_url, sched_priority_step_s=step_s) as (app, client):
        workers("w0", f"127.0.0.1:{app.port}", JOBS_WORKER_SLOTS="ai-interactive=2")
        stop = asyncio.Event()

        async def high_load() -> None:  # ~40 jobs/s offered, ~20/s served: a growing backlog
            while not stop.is_set():
                await create_many(client, 4, user="hi", priority=gap, job_input={"sleep_ms": 100})
                await asyncio.sleep(0.1)  # pacing the load generator, not synchronisation

        load = asyncio.create_task(high_load())
        try:
            await eventually(
                lambda: db.fetchval("SELECT count(*) > 20 FROM jobs WHERE status = 'queued'"),
                timeout=30,
            )
            [low] = await create_many(client, 1, user="lo", priority=0)
            await eventually(
                lambda: db.fetchval("SELECT started_at IS NOT NULL FROM jobs WHERE id = $1", low),
                timeout=30,
            )
            backlog = await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued'")
        finally:
            stop.set()
            await load

    overtook = await db.fetchval(
        """SELECT max(h.created_at - l.created_at) FROM jobs h, jobs l
           WHERE l.id = $1 AND h.id <> l.id AND h.started_at < l.started_at - interval '0.1 s'""",
        low,
    )
    assert backlog > 0, "the high-priority load must still be waiting when the low job runs"
    assert overtook is not None, "high-priority work created before it must run first"
    assert overtook <= timedelta(seconds=gap * step_s + 0.1), overtook


async def test_a_big_backlog_does_not_delay_another_users_few_jobs(
    database_url: str, nats_url: str, db: asyncpg.Connection, workers: Callable[..., WorkerProcess]
) -> None:
    async with service(database_url, nats_url) as (app, client):
        for n in range(2):
            workers(f"w{n}", f"127.0.0.1:{app.port}", JOBS_WORKER_SLOTS="ai-interactive=4")
        big = await create_many(client, 3000, user="A", job_input={"sleep_ms": 100})
        small = await create_many(client, 20, user="B", job_input={"sleep_ms": 100})
        await eventually(lambda: all_finished(db, small), timeout=60, interval=0.1)
        b_done = await db.fetchval(
            "SELECT max(finished_at) FROM jobs WHERE id = ANY($1::text[]::uuid[])", small
        )
        a_done = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE user_id = 'A' AND finished_at <= $1", b_done
        )

    print(f"A had finished {a_done} of {len(big)} when B was done")
    assert a_done < 0.25 * len(big), f"A had finished {a_done} of {len(big)} when B was done"


async def test_a_concurrency_key_limit_holds_across_replicas_and_a_killed_worker(
    database_url: str, nats_url: str, db: asyncpg.Connection, workers: Callable[..., WorkerProcess]
) -> None:
    limit, seen = 2, defaultdict(int)
    async with (
        service(database_url, nats_url) as (one, client),
        service(database_url, nats_url) as (two, _),
    ):
        ids = []
        for user in ("u1", "u2", "u3", "u4"):
            ids += await create_many(
                client, 12, user=user, job_type="keyed", job_input={"sleep_ms": 200}
            )
        procs = [workers(f"w{n}", f"127.0.0.1:{(one, two)[n % 2].port}") for n in range(3)]
        sampling = True

        async def monitor() -> None:
            async with asyncpg.create_pool(database_url, min_size=1, max_size=1) as pool:
                while sampling:
                    for row in await pool.fetch(
                        "SELECT concurrency_key, count(*) AS n FROM jobs"
                        " WHERE status IN ('running', 'cancel_requested') GROUP BY 1"
                    ):
                        seen[row["concurrency_key"]] = max(seen[row["concurrency_key"]], row["n"])
                    await asyncio.sleep(0.01)  # the sampling period

        sampler = asyncio.create_task(monitor())
        # a worker with keyed jobs running (a busy worker keeps its slots with the jobs it
        # is granted with its results, ADR 0009: whichever started first may hold them all)
        busy = await eventually(
            lambda: db.fetchval(
                "SELECT locked_by FROM jobs WHERE status = 'running' AND locked_by LIKE 'w_'"
                " LIMIT 1"
            ),
            timeout=30,
        )
        procs[int(str(busy)[1:])].signal(signal.SIGKILL)
        await eventually(lambda: all_finished(db, ids), timeout=90, interval=0.2)
        sampling = False
        await sampler

    assert seen and max(seen.values()) == limit, dict(seen)
    assert max_overlap_by_key(await db.fetch(EVENTS)) <= limit


EVENTS = """
SELECT j.concurrency_key AS key, e.job_id, e.to_status, e.from_status, e.created_at AS at
FROM job_events e JOIN jobs j ON j.id = e.job_id
WHERE j.concurrency_key IS NOT NULL
ORDER BY e.id
"""


def max_overlap_by_key(events: list[asyncpg.Record]) -> int:
    """The most attempts of one key whose running intervals (from the timeline: into
    running, until the next transition) overlap."""
    began: dict[Any, datetime] = {}
    edges: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for e in events:
        if e["to_status"] == "running":
            began[e["job_id"]] = e["at"]
        elif e["from_status"] in ("running", "cancel_requested") and e["job_id"] in began:
            start = began.pop(e["job_id"])
            edges[e["key"]] += [(start, 1), (e["at"], -1)]
    most = 0
    for marks in edges.values():
        level = 0
        for _, delta in sorted(marks, key=lambda m: (m[0], m[1])):
            level += delta
            most = max(most, level)
    return most


async def test_delayed_jobs_start_on_time_and_never_before(
    database_url: str, nats_url: str, db: asyncpg.Connection, workers: Callable[..., WorkerProcess]
) -> None:
    async with service(database_url, nats_url) as (app, client):
        for n in range(2):
            workers(f"w{n}", f"127.0.0.1:{app.port}")
        base = datetime.now(UTC) + timedelta(seconds=2)
        ids = []
        for i in range(200):
            run_at = Timestamp()
            run_at.FromDatetime(base + timedelta(seconds=10 * i / 200))
            ids += await create_many(client, 1, user=f"u{i % 7}", run_at=run_at)
        await eventually(lambda: all_finished(db, ids), timeout=60, interval=0.2)

    # each job's time is its create dispatch row's available_at (its run_at)
    due = await db.fetch(
        "SELECT j.started_at, o.available_at FROM jobs j JOIN outbox_events o"
        " ON o.aggregate_id = j.id::text AND o.dedupe_key LIKE '%:create'"
    )
    lateness = sorted((r["started_at"] - r["available_at"]).total_seconds() for r in due)
    assert len(lateness) == 200
    assert lateness[0] >= 0, "a job started before its time"
    p99 = lateness[int(len(lateness) * 0.99) - 1]
    assert p99 <= 1.0, f"p99 lateness {p99:.3f} s (median {statistics.median(lateness):.3f})"


async def test_a_rolling_deploy_runs_each_job_on_a_worker_of_its_version(
    database_url: str, nats_url: str, db: asyncpg.Connection, workers: Callable[..., WorkerProcess]
) -> None:
    """job_service creates versioned@2.0.0 jobs; an old worker runs only 1.0.0: the jobs
    wait, explained and counted, until a worker of their version arrives."""
    async with service(database_url, nats_url, metrics_collect_interval_s=0.2) as (app, client):
        target = f"127.0.0.1:{app.port}"
        workers("old", target, SCHED_TEST_VERSION="1.0.0")
        ids = await create_many(client, 20, user="u1", job_type="versioned")
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) > 0 FROM worker_definitions WHERE worker_id = 'old'"
            ),
            timeout=30,
        )
        hold = (await client.admin.GetJob(apb.AdminGetJobRequest(job_id=ids[0]))).job.hold
        waiting = await eventually(
            lambda: (REGISTRY.get_sample_value("jobs_waiting_without_worker") or 0) >= 20,
            timeout=10,
        )
        workers("new", target)
        await eventually(lambda: all_finished(db, ids), timeout=60, interval=0.2)

    assert hold.reason == job_pb2.JobHold.REASON_NO_WORKER_FOR_VERSION
    assert hold.key == "versioned@2.0.0"
    assert waiting
    ran_on = await db.fetch(
        "SELECT DISTINCT locked_by FROM jobs WHERE id = ANY($1::text[]::uuid[])", ids
    )
    assert [r["locked_by"] for r in ran_on] == ["new"]
