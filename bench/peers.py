"""This engine beside pgqueuer and procrastinate, in one run, on one PostgreSQL.

    make bench-peers                 # python -m bench.peers (installs the bench extra)
    python -m bench.peers --jobs 10000 --rate 200 --seconds 10 --only engine,pgqueuer

One embedded PostgreSQL (pgserver; fsync, synchronous_commit and full_page_writes at their
defaults: on) holds three databases, one per system, and one NATS JetStream (nats-server's
defaults: file storage, sync_interval 2 min) serves the engine. Each system runs alone in
turn (after a checkpoint, with no autovacuum worker left running from the one before), with
two worker processes at its defaults, through the same two phases on synthetic no-op jobs:

1. backlog drain   N jobs enqueued with no worker running, then two workers started:
                   jobs/s between the first and the last completion
2. steady          jobs enqueued one at a time at RATE/s for SECONDS, workers running:
                   enqueue → done latency p50 / p99

Every timestamp is the database's (``now()`` of the statements that enqueued a job and that
recorded it done), so no system is timed by its client. The engine's steady phase also
prints where the time goes, from its own columns: the dispatch row claimed (by CreateJob's
own statement, which hands it to the outbox dispatcher: 0 unless a claim had to take it),
published (the NATS ack, then the row marked), the job locked by a worker, done.

The peers run as their CLIs run them (``pgq run``, ``procrastinate worker``) over the apps
of ``bench.pgqueuer_app`` and ``bench.procrastinate_app``, at their defaults (pgqueuer:
batches of 10, completions buffered up to 0.1 s; procrastinate: one job at a time per
worker, which ``--procrastinate-concurrency`` changes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import uvloop

from bench.e2e import NOOP, Stack, channel
from bench.profile import Profiler
from devstack.embedded import ensure_database
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc

WORKERS = 2
USERS = 250  # the engine's per-user quotas (100 unfinished jobs) stay out of the way
BATCH = 500
# How often a phase checks whether its jobs are done: the figures come from the systems' own
# timestamps, so a slower poll only ends the wait later, and costs the database less.
POLL_S = 0.25
TASK = "noop"


@dataclass
class Figures:
    drain: float = 0.0
    p50: float = 0.0
    p99: float = 0.0
    stages: list[tuple[str, float, float]] = field(default_factory=list)
    profile: str = ""  # py-spy's top costs (``--profile``): the drain ran slower for it


class System:
    """One queue under test: enqueue, run workers, read its own done timestamps."""

    name = ""

    async def enqueue_backlog(self, n: int) -> list[object]:
        raise NotImplementedError

    async def enqueue_one(self, i: int) -> object:
        raise NotImplementedError

    def start_workers(self) -> None:
        raise NotImplementedError

    def stop_workers(self) -> None:
        """Stops the system's processes (the engine's job_service too): the next system
        runs alone."""
        raise NotImplementedError

    async def done(self) -> int:
        """How many jobs this system has run to success so far, all phases together. One
        count without the ids: a poll that probed every id of the phase cost the database
        more than some of the systems it was timing."""
        raise NotImplementedError

    async def completion_span(self, ids: Sequence[object]) -> float:
        """Seconds from the first to the last of these jobs done."""
        raise NotImplementedError

    async def latencies(self, ids: Sequence[object]) -> list[float]:
        """Enqueue → done, ms, per job."""
        raise NotImplementedError

    async def stages(self, ids: Sequence[object]) -> list[tuple[str, float, float]]:
        return []

    def check(self) -> None:
        """Raises when a worker process has died."""

    def pids(self) -> dict[str, int]:
        """The processes to profile: none but the engine's."""
        return {}

    async def close(self) -> None:
        return None


class Processes:
    """Worker processes of one system, logging to the run's directory."""

    def __init__(self, root: Path, name: str, env: dict[str, str]) -> None:
        self.root, self.name, self.env = root, name, env
        self.running: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str]) -> None:
        for n in range(WORKERS):
            log = (self.root / f"{self.name}-worker-{n}.log").open("wb")
            self.running.append(
                subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
            )

    def check(self) -> None:
        """Raises when a worker has exited: a phase would otherwise wait for nothing."""
        for process in self.running:
            if process.poll() is not None:
                raise RuntimeError(f"a {self.name} worker exited ({process.returncode}); see logs")

    def stop(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.running:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.running.clear()


# --- this engine ---------------------------------------------------------------------------

ENGINE_STAGES = """
SELECT extract(epoch FROM o.locked_at - j.created_at) * 1000 AS claimed,
       extract(epoch FROM o.published_at - j.created_at) * 1000 AS published,
       extract(epoch FROM j.locked_at - j.created_at) * 1000 AS locked,
       extract(epoch FROM j.finished_at - j.created_at) * 1000 AS done
FROM jobs j JOIN outbox_events o ON o.dedupe_key = 'job.dispatch:' || j.id || ':create'
WHERE j.id = ANY($1::uuid[])
"""


class Engine(System):
    name = "this engine"

    def __init__(self, stack: Stack, db: asyncpg.Connection) -> None:
        self.stack, self.db = stack, db
        self.channel = channel(stack.port)
        self.stub = job_service_pb2_grpc.JobServiceStub(self.channel)

    async def enqueue_backlog(self, n: int) -> list[object]:
        ids: list[object] = []
        for start in range(0, n, BATCH):
            response = await self.stub.CreateJobs(
                jpb.CreateJobsRequest(
                    requests=[_create(i) for i in range(start, min(n, start + BATCH))]
                )
            )
            for result in response.results:
                if result.HasField("error"):
                    raise RuntimeError(f"CreateJobs refused a job: {result.error.message}")
                ids.append(result.response.job.id)
        return ids

    async def enqueue_one(self, i: int) -> object:
        response = await self.stub.CreateJob(_create(i))
        return response.job.id

    def start_workers(self) -> None:
        for _ in range(WORKERS):
            self.stack.start_worker()

    def stop_workers(self) -> None:
        for process in [*self.stack.workers, self.stack.service]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(30)

    async def done(self) -> int:
        return int(await self.db.fetchval("SELECT count(*) FROM jobs WHERE status = 'succeeded'"))

    async def completion_span(self, ids: Sequence[object]) -> float:
        return float(
            await self.db.fetchval(
                "SELECT extract(epoch FROM max(finished_at) - min(finished_at)) FROM jobs"
                " WHERE id = ANY($1::uuid[])",
                ids,
            )
        )

    async def latencies(self, ids: Sequence[object]) -> list[float]:
        rows = await self.db.fetch(
            "SELECT extract(epoch FROM finished_at - created_at) * 1000 FROM jobs"
            " WHERE id = ANY($1::uuid[])",
            ids,
        )
        return [float(r[0]) for r in rows]

    async def stages(self, ids: Sequence[object]) -> list[tuple[str, float, float]]:
        rows = await self.db.fetch(ENGINE_STAGES, ids)
        labels = {
            "claimed": "dispatch row claimed (0: by CreateJob's own statement)",
            "published": "dispatch published (NATS ack, row marked)",
            "locked": "job locked by a worker (LockJobs)",
            "done": "result committed (SubmitResults)",
        }
        return [
            (label, *p50_p99([float(r[column]) for r in rows if r[column] is not None]))
            for column, label in labels.items()
        ]

    def check(self) -> None:
        for process in [self.stack.service, *self.stack.workers]:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{process.args} exited ({process.returncode}); see logs")

    def pids(self) -> dict[str, int]:
        assert self.stack.service is not None
        workers = {f"worker-{n}": w.pid for n, w in enumerate(self.stack.workers)}
        return {"job_service": self.stack.service.pid, **workers}

    async def close(self) -> None:
        await self.channel.close()


def _create(i: int) -> jpb.CreateJobRequest:
    return jpb.CreateJobRequest(user_id=f"peers-{i % USERS}", job_type="synthetic", input=NOOP)


# --- pgqueuer ------------------------------------------------------------------------------


class Pgqueuer(System):
    name = "pgqueuer"

    def __init__(self, pool: asyncpg.Pool, workers: Processes) -> None:
        from pgqueuer import AsyncpgPoolDriver, Queries

        self.pool, self.workers = pool, workers
        self.queries = Queries(AsyncpgPoolDriver(pool))

    async def install(self) -> None:
        await self.queries.install()

    async def enqueue_backlog(self, n: int) -> list[object]:
        ids: list[object] = []
        for start in range(0, n, BATCH):
            k = min(BATCH, n - start)
            ids += await self.queries.enqueue([TASK] * k, [None] * k, [0] * k)
        return ids

    async def enqueue_one(self, i: int) -> object:
        return (await self.queries.enqueue(TASK, None))[0]

    def start_workers(self) -> None:
        self.workers.start([sys.executable, "-m", "bench.pgqueuer_app"])

    def stop_workers(self) -> None:
        self.workers.stop()

    def check(self) -> None:
        self.workers.check()

    async def done(self) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
            )
        )

    async def completion_span(self, ids: Sequence[object]) -> float:
        return float(
            await self.pool.fetchval(
                "SELECT extract(epoch FROM max(created) - min(created)) FROM pgqueuer_log"
                " WHERE status = 'successful' AND job_id = ANY($1::bigint[])",
                ids,
            )
        )

    async def latencies(self, ids: Sequence[object]) -> list[float]:
        rows = await self.pool.fetch(
            "SELECT extract(epoch FROM d.created - q.created) * 1000 FROM pgqueuer_log q"
            " JOIN pgqueuer_log d ON d.job_id = q.job_id AND d.status = 'successful'"
            " WHERE q.status = 'queued' AND q.job_id = ANY($1::bigint[])",
            ids,
        )
        return [float(r[0]) for r in rows]


# --- procrastinate -------------------------------------------------------------------------


class Procrastinate(System):
    name = "procrastinate"

    def __init__(self, pool: asyncpg.Pool, workers: Processes, concurrency: int = 0) -> None:
        from bench.procrastinate_app import app, noop

        self.pool, self.workers, self.concurrency = pool, workers, concurrency
        self.app, self.task = app, noop

    async def install(self) -> None:
        await self.app.open_async()
        await self.app.schema_manager.apply_schema_async()

    async def enqueue_backlog(self, n: int) -> list[object]:
        ids: list[object] = []
        for start in range(0, n, BATCH):
            ids += await self.task.batch_defer_async(*({} for _ in range(min(BATCH, n - start))))
        return ids

    async def enqueue_one(self, i: int) -> object:
        return await self.task.defer_async()

    def start_workers(self) -> None:
        app = "--app=bench.procrastinate_app.app"
        tuned = ["--concurrency", str(self.concurrency)] if self.concurrency else []
        self.workers.start([sys.executable, "-m", "procrastinate", app, "worker", *tuned])

    def stop_workers(self) -> None:
        self.workers.stop()

    def check(self) -> None:
        self.workers.check()

    async def done(self) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
            )
        )

    async def completion_span(self, ids: Sequence[object]) -> float:
        return float(
            await self.pool.fetchval(
                "SELECT extract(epoch FROM max(at) - min(at)) FROM procrastinate_events"
                " WHERE type = 'succeeded' AND job_id = ANY($1::bigint[])",
                ids,
            )
        )

    async def latencies(self, ids: Sequence[object]) -> list[float]:
        rows = await self.pool.fetch(
            "SELECT extract(epoch FROM d.at - q.at) * 1000 FROM procrastinate_events q"
            " JOIN procrastinate_events d ON d.job_id = q.job_id AND d.type = 'succeeded'"
            " WHERE q.type = 'deferred' AND q.job_id = ANY($1::bigint[])",
            ids,
        )
        return [float(r[0]) for r in rows]

    async def close(self) -> None:
        await self.app.close_async()


# --- the phases ----------------------------------------------------------------------------


def p50_p99(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    cuts = statistics.quantiles(sorted(values), n=100)
    return cuts[49], cuts[98]


async def wait_for(predicate: Callable[[], Awaitable[bool]], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_S)


async def settle(admin_url: str) -> None:
    """Before each system: a checkpoint, then no autovacuum worker left running (60 s at
    most), so that no system pays for the WAL and the dead rows of the one before it."""
    db = await asyncpg.connect(admin_url)
    try:
        await db.execute("CHECKPOINT")
        for _ in range(int(60 / POLL_S)):
            if not await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
            ):
                break
            await asyncio.sleep(POLL_S)
    finally:
        await db.close()


async def measure(system: System, args: argparse.Namespace) -> Figures:
    figures = Figures()
    print(f"{system.name}: backlog of {args.jobs}", flush=True)
    before = await system.done()
    backlog = await system.enqueue_backlog(args.jobs)
    system.start_workers()
    profiler = None
    if args.profile and system.pids():
        # from the first completions on: the workers' start-up (imports) is not the drain
        await wait_for(
            lambda: _done_since(system, before, len(backlog) // 100), 300, "the first completions"
        )
        profiler = Profiler(system.pids(), args.profile)
    await wait_for(
        lambda: _done_since(system, before, len(backlog)), 900, f"{system.name}'s backlog"
    )
    if profiler is not None:
        figures.profile = profiler.stop()
    figures.drain = (len(backlog) - 1) / await system.completion_span(backlog)

    print(f"{system.name}: steady {args.rate:.0f}/s for {args.seconds:.0f} s", flush=True)
    n = int(args.rate * args.seconds)
    before = await system.done()
    started = time.perf_counter()
    calls = []
    for i in range(n):
        delay = started + i / args.rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        calls.append(asyncio.ensure_future(system.enqueue_one(i)))
    steady = await asyncio.gather(*calls)
    await wait_for(lambda: _done_since(system, before, n), 300, f"{system.name}'s steady jobs")
    figures.p50, figures.p99 = p50_p99(await system.latencies(steady))
    figures.stages = await system.stages(steady)
    system.stop_workers()
    return figures


async def _done_since(system: System, before: int, n: int) -> bool:
    """At least ``n`` more jobs done than the ``before`` count (the phases run one at a
    time, so every new completion is the phase's)."""
    system.check()
    return await system.done() - before >= n


async def main(args: argparse.Namespace) -> None:
    chosen = args.only.split(",")
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-peers-"))
    stack = Stack(root)
    results: dict[str, Figures] = {}
    try:
        stack.pg.start()
        for name in ("pgqueuer", "procrastinate"):
            if name not in chosen:
                continue
            await ensure_database(stack.pg.url("postgres"), name)
            url = stack.pg.url(name)
            env = {**os.environ, "BENCH_PEER_DSN": url}
            os.environ["BENCH_PEER_DSN"] = url  # procrastinate's app reads it at import
            pool = await asyncpg.create_pool(url, min_size=2, max_size=16)
            workers = Processes(root, name, env)
            peer: Pgqueuer | Procrastinate = (
                Pgqueuer(pool, workers)
                if name == "pgqueuer"
                else Procrastinate(pool, workers, args.procrastinate_concurrency)
            )
            try:
                await peer.install()
                await settle(stack.pg.url("postgres"))
                results[name] = await measure(peer, args)
            finally:
                workers.stop()
                await peer.close()
                await pool.close()
        if "engine" in chosen:
            await stack.start()
            db = await asyncpg.connect(stack.database_url)
            engine = Engine(stack, db)
            try:
                await settle(stack.pg.url("postgres"))
                results["engine"] = await measure(engine, args)
            finally:
                await engine.close()
                await db.close()
    except BaseException:
        stack.stop()
        print(f"failed; the processes' logs are in {root}", file=sys.stderr)
        raise
    stack.stop()
    shutil.rmtree(root, ignore_errors=True)
    report(args, results)


def report(args: argparse.Namespace, results: dict[str, Figures]) -> None:
    engine = results.get("engine")
    print(f"\nSide by side: synthetic no-op jobs, {WORKERS} worker processes each, one")
    print(f"embedded PostgreSQL (fsync on), {os.cpu_count()} cores; NATS JetStream for the")
    print("engine at nats-server's defaults (file storage, sync_interval 2 min).")
    print(f"{'system':<16}{'drain jobs/s':>14}{'p50 ms':>10}{'p99 ms':>10}", end="")
    print(f"{'drain x':>10}{'p50 x':>8}{'p99 x':>8}" if engine else "")
    for name in ("engine", "pgqueuer", "procrastinate"):
        if name not in results:
            continue
        f = results[name]
        label = "this engine" if name == "engine" else name
        if name == "procrastinate" and args.procrastinate_concurrency:
            label += f" -c {args.procrastinate_concurrency}"
        line = f"{label:<16}{f.drain:>14,.0f}{f.p50:>10.1f}{f.p99:>10.1f}"
        if engine and name != "engine":
            # the engine against this peer: drain higher is better, latency lower is better
            line += f"{engine.drain / f.drain:>10.2f}{engine.p50 / f.p50:>8.2f}"
            line += f"{engine.p99 / f.p99:>8.2f}"
        print(line)
    print(f"(drain: {args.jobs} jobs; steady: {args.rate:.0f}/s for {args.seconds:.0f} s)")
    if engine:
        print("('x' columns: this engine's figure / the peer's)")
    if engine and engine.stages:
        print("\nThis engine's steady phase, time since the job's create (ms):")
        print(f"{'stage':<46}{'p50':>8}{'p99':>8}")
        for label, p50, p99 in engine.stages:
            print(f"{label:<46}{p50:>8.1f}{p99:>8.1f}")
    if engine and engine.profile:
        print(f"\nThis engine's processes during the drain (py-spy, files in {args.profile}):")
        print(engine.profile)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="backlog to drain")
    parser.add_argument("--rate", type=float, default=200.0, help="steady phase jobs/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady phase length")
    parser.add_argument(
        "--only", default="engine,pgqueuer,procrastinate", help="comma-separated systems"
    )
    parser.add_argument(
        "--procrastinate-concurrency",
        type=int,
        default=0,
        help="jobs at once per procrastinate worker (default: procrastinate's own, 1)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="record job_service and the workers with py-spy during the engine's drain here",
    )
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
