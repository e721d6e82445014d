"""This engine beside pgqueuer and procrastinate, in one run, on one PostgreSQL.

    make bench-peers                 # python -m bench.peers (installs the bench extra)
    python -m bench.peers --only engine --nats default          # the engine alone, ~1 min
    python -m bench.peers --only engine --nats default --service-processes 1,2

One embedded PostgreSQL (pgserver; fsync, synchronous_commit and full_page_writes at their
defaults: on) holds a database per system and variant. Each runs alone in turn (after a
checkpoint, with no autovacuum worker left running from the one before), with two worker
processes, through the same two phases on synthetic no-op jobs:

1. backlog drain   N jobs enqueued with no worker running, then two workers started:
                   jobs/s between the first and the last completion
2. steady          jobs enqueued one at a time at RATE/s for SECONDS, workers running:
                   enqueue → done latency p50 / p99

The variants of one default run:

- this engine twice, over a fresh NATS JetStream each time: at nats-server's defaults (file
  storage, ``sync_interval`` 2 min) and as deployed (``sync_interval: always``, every write
  fsynced before it is acknowledged: deploy/nats/nats.conf, deploy/k8s/nats.yaml);
  ``--nats`` chooses, ``--service-processes`` runs job_service as that many processes on
  one port (JOBS_SERVICE_PROCESSES; a comma list runs each);
- pgqueuer at its defaults (batches of 10, completions buffered up to 0.1 s);
- procrastinate at concurrency 1 (its default: one job at a time per worker), 4, 16 and
  32 (``--procrastinate-concurrency``): the engine's latency ratios are taken against its
  best p50 and its best p99 among them, and against its default. Only the default drains
  the backlog; the others run a warm-up of WARM_UP jobs, then the steady phase.

Every timestamp is the database's (``now()`` of the statements that enqueued a job and that
recorded it done), so no system is timed by its client. The engine's steady phase also
prints where the time goes, from its own columns: the dispatch row claimed (by CreateJob's
own statement, which hands it to the outbox dispatcher: 0 unless a claim had to take it),
published (the NATS ack, then the row marked), the job locked by a worker, done. The engine
is called through CLIENTS channels of their own (a connection each), so that job_service
processes sharing a port share the callers too.

The peers run as their CLIs run them (``pgq run``, ``procrastinate worker``) over the apps
of ``bench.pgqueuer_app`` and ``bench.procrastinate_app``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
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

from bench import stages as stage_times
from bench.cpu_meter import MACHINE, CpuMeter, own_cpu_s, trees
from bench.e2e import CLIENT_TOKEN, NOOP, Stack
from bench.profile import Profiler
from devstack.embedded import EmbeddedNats, ensure_database
from devstack.embedded.nats import nats_server_binary
from shared.grpc_client import ChannelConfig, aio_channel
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc

WORKERS = 2
USERS = 250  # the engine's per-user quotas (100 unfinished jobs) stay out of the way
BATCH = 500
# How often a phase checks whether its jobs are done: the figures come from the systems' own
# timestamps, so a slower poll only ends the wait later, and costs the database less.
POLL_S = 0.25
TASK = "noop"
# A phase waiting longer than this says how far it has come.
PROGRESS_S = 15.0
# The engine's callers: channels with a connection each (a real service has many callers).
CLIENTS = 4
# procrastinate's swept concurrencies; the first is its default, the only one drained (the
# others run a warm-up of WARM_UP jobs, then the steady phase).
PROCRASTINATE_CONCURRENCY = "1,4,16,32"
WARM_UP = 200


@dataclass
class Figures:
    drain: float = float("nan")  # nan: not measured
    p50: float = 0.0
    p99: float = 0.0
    stages: list[tuple[str, float, float, int]] = field(default_factory=list)
    # phase ("drain", "steady") → process group → CPU ms per job (MACHINE: every core)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    profile: str = ""  # py-spy's top costs (``--profile``): the drain ran slower for it
    spread: str = ""  # the engine's connections per job_service process


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

    async def stages(self, ids: Sequence[object]) -> list[tuple[str, float, float, int]]:
        """Per stage (label, p50 ms, p99 ms, jobs): read after the workers stopped."""
        return []

    def cpu_groups(self) -> dict[str, Callable[[], float]]:
        """The system's own processes by group, each its CPU seconds so far (PostgreSQL
        and the load generator are counted by ``measure``)."""
        return {}

    def check(self) -> None:
        """Raises when a worker process has died."""

    def pids(self) -> dict[str, int]:
        """The processes to profile: none but the engine's."""
        return {}

    def spread(self) -> str:
        return ""

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

    def pids(self) -> list[int]:
        return [p.pid for p in self.running if p.poll() is None]

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


@dataclass(frozen=True)
class EngineVariant:
    """How the engine is run: NATS's ``sync_interval`` and job_service's process count."""

    nats: str  # "default" or "always"
    processes: int = 1

    @property
    def label(self) -> str:
        label = f"engine, NATS {self.nats}"
        return label + (f", {self.processes} proc" if self.processes > 1 else "")


class SyncedNats(EmbeddedNats):
    """nats-server as deployed (deploy/nats/nats.conf, deploy/k8s/nats.yaml): JetStream
    fsyncs every write before acknowledging it (``sync_interval: always``). devstack's
    server takes no configuration file; this one adds one to the same command line."""

    def start(self) -> None:
        if self.running:
            return
        self.store_dir.mkdir(parents=True, exist_ok=True)
        config = self.store_dir / "nats.conf"
        config.write_text("jetstream {\n  sync_interval: always\n}\n")
        args = [str(nats_server_binary()), "-c", str(config), "-js", "-a", self.host]
        args += ["-p", str(self.port), "-sd", str(self.store_dir)]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise


class Engine(System):
    def __init__(self, stack: Stack, db: asyncpg.Connection, variant: EngineVariant) -> None:
        self.stack, self.db, self.name = stack, db, variant.label
        self.stage_dir: Path | None = None  # where the workers write their stage times
        # a subchannel pool of its own per channel: channels share one connection otherwise
        config = ChannelConfig(target=f"127.0.0.1:{stack.port}", token=CLIENT_TOKEN)
        own = [("grpc.use_local_subchannel_pool", 1)]
        self.channels = [aio_channel(config, own) for _ in range(CLIENTS)]
        self.stubs = [job_service_pb2_grpc.JobServiceStub(c) for c in self.channels]

    async def enqueue_backlog(self, n: int) -> list[object]:
        ids: list[object] = []
        for start in range(0, n, BATCH):
            response = await self.stubs[start // BATCH % CLIENTS].CreateJobs(
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
        response = await self.stubs[i % CLIENTS].CreateJob(_create(i))
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

    async def stages(self, ids: Sequence[object]) -> list[tuple[str, float, float, int]]:
        return await stage_times.stage_table(self.db, ids, self.stage_dir)

    def cpu_groups(self) -> dict[str, Callable[[], float]]:
        stack = self.stack
        return {
            "job_service": trees(stack.service_pids),
            "workers": trees(lambda: [w.pid for w in stack.workers if w.poll() is None]),
            "nats": trees(lambda: [pid] if (pid := stack.nats.pid) is not None else []),
        }

    def check(self) -> None:
        for process in [self.stack.service, *self.stack.workers]:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{process.args} exited ({process.returncode}); see logs")

    def pids(self) -> dict[str, int]:
        services = self.stack.service_pids()
        names = ["job_service", *(f"job_service-{n}" for n in range(1, len(services)))]
        workers = {f"worker-{n}": w.pid for n, w in enumerate(self.stack.workers)}
        return {**dict(zip(names, services, strict=True)), **workers}

    def spread(self) -> str:
        """Connections to the gRPC port held by each job_service process (callers and
        workers: the kernel chose), e.g. "4 / 2"."""
        return " / ".join(
            str(_connections(pid, self.stack.port)) for pid in self.stack.service_pids()
        )

    async def close(self) -> None:
        for c in self.channels:
            await c.close()


def _connections(pid: int, port: int) -> int:
    """Established TCP connections on local ``port`` among ``pid``'s open sockets."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            count += local_port == port and fields[3] == "01" and fields[9] in inodes
    return count


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

    def cpu_groups(self) -> dict[str, Callable[[], float]]:
        return {"workers": trees(self.workers.pids)}

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

    def __init__(self, pool: asyncpg.Pool, workers: Processes, concurrency: int, url: str) -> None:
        import procrastinate

        from bench.procrastinate_app import app, noop

        self.pool, self.workers, self.concurrency = pool, workers, concurrency
        self.name = f"procrastinate -c {concurrency}"
        self.app, self.task = app, noop
        # the app is a module's: on this run's database until close (its workers are
        # processes of their own, which read BENCH_PEER_DSN)
        self._connector = app.replace_connector(procrastinate.PsycopgConnector(conninfo=url))
        self._connector.__enter__()

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
        concurrency = ["--concurrency", str(self.concurrency)]
        self.workers.start([sys.executable, "-m", "procrastinate", app, "worker", *concurrency])

    def stop_workers(self) -> None:
        self.workers.stop()

    def check(self) -> None:
        self.workers.check()

    def cpu_groups(self) -> dict[str, Callable[[], float]]:
        return {"workers": trees(self.workers.pids)}

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
        self._connector.__exit__(None, None, None)


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


async def measure(
    system: System,
    args: argparse.Namespace,
    profile: Path | None,
    drain: bool = True,
    postgres: Callable[[], float] = lambda: 0.0,
) -> Figures:
    """Both phases; with ``drain`` False, only a warm-up backlog before the steady phase
    (the workers past their start-up) and no drain figure. ``postgres``: the PostgreSQL
    server's CPU seconds so far, counted in the system's CPU per job."""
    figures = Figures()
    meter = CpuMeter({**system.cpu_groups(), "postgres": postgres, "client": own_cpu_s})
    jobs = args.jobs if drain else WARM_UP
    print(f"{system.name}: {'backlog' if drain else 'warm-up'} of {jobs}", flush=True)
    before = await system.done()
    backlog = await system.enqueue_backlog(jobs)
    system.start_workers()
    # CPU and profiles from the first completions on: the workers' start-up (imports) is
    # not the drain
    await wait_for(
        lambda: _done_since(system, before, len(backlog) // 100), 300, "the first completions"
    )
    meter.start()
    counted_from = await system.done()
    profiler = Profiler(system.pids(), profile) if profile is not None and system.pids() else None
    await wait_for(_progress(system, before, len(backlog)), 900, f"{system.name}'s backlog")
    if profiler is not None:
        figures.profile = profiler.stop()
    if drain:
        figures.drain = (len(backlog) - 1) / await system.completion_span(backlog)
        figures.cpu["drain"] = meter.per_job(await system.done() - counted_from)

    print(f"{system.name}: steady {args.rate:.0f}/s for {args.seconds:.0f} s", flush=True)
    n = int(args.rate * args.seconds)
    before = await system.done()
    meter.start()
    started = time.perf_counter()
    calls = []
    for i in range(n):
        delay = started + i / args.rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        calls.append(asyncio.ensure_future(system.enqueue_one(i)))
    steady = await asyncio.gather(*calls)
    await wait_for(_progress(system, before, n), 300, f"{system.name}'s steady jobs")
    figures.cpu["steady"] = meter.per_job(n)
    figures.p50, figures.p99 = p50_p99(await system.latencies(steady))
    figures.spread = system.spread()
    system.stop_workers()
    figures.stages = await system.stages(steady)  # the workers wrote theirs as they exited
    return figures


def _progress(system: System, before: int, n: int) -> Callable[[], Awaitable[bool]]:
    """``_done_since`` that prints how far the phase has come every PROGRESS_S."""
    started = last = time.monotonic()

    async def done() -> bool:
        nonlocal last
        system.check()
        count = await system.done() - before
        now = time.monotonic()
        if count < n and now - last >= PROGRESS_S:
            last = now
            rate = count / (now - started)
            print(f"  {count:,} of {n:,} done, {rate:,.0f}/s so far", flush=True)
        return count >= n

    return done


async def _done_since(system: System, before: int, n: int) -> bool:
    """At least ``n`` more jobs done than the ``before`` count (the phases run one at a
    time, so every new completion is the phase's)."""
    system.check()
    return await system.done() - before >= n


@dataclass
class Results:
    engines: list[tuple[EngineVariant, Figures]] = field(default_factory=list)
    pgqueuer: Figures | None = None
    procrastinate: list[tuple[int, Figures]] = field(default_factory=list)


async def run_peer(
    stack: Stack,
    root: Path,
    name: str,
    concurrency: int,
    args: argparse.Namespace,
    drain: bool = True,
) -> Figures:
    """pgqueuer, or procrastinate at ``concurrency``, in a database of its own."""
    database = name if name == "pgqueuer" else f"procrastinate_c{concurrency}"
    await ensure_database(stack.pg.url("postgres"), database)
    url = stack.pg.url(database)
    env = {**os.environ, "BENCH_PEER_DSN": url}
    pool = await asyncpg.create_pool(url, min_size=2, max_size=16)
    workers = Processes(root, database, env)
    peer: Pgqueuer | Procrastinate = (
        Pgqueuer(pool, workers)
        if name == "pgqueuer"
        else Procrastinate(pool, workers, concurrency, url)
    )
    try:
        await peer.install()
        await settle(stack.pg.url("postgres"))
        return await measure(peer, args, None, drain, postgres_cpu(stack))
    finally:
        workers.stop()
        await peer.close()
        await pool.close()


async def run_engine(
    stack: Stack, variant: EngineVariant, args: argparse.Namespace, profile: Path | None
) -> Figures:
    """The engine on a fresh database and a fresh NATS JetStream of the variant's kind."""
    admin = await asyncpg.connect(stack.pg.url("postgres"))
    try:
        await admin.execute("DROP DATABASE IF EXISTS jobs WITH (FORCE)")
    finally:
        await admin.close()
    store = stack.root / f"nats-{variant.nats}-{variant.processes}"
    stage_dir = stack.root / f"stages-{variant.nats}-{variant.processes}"
    stage_dir.mkdir()
    os.environ[stage_times.ENV] = str(stage_dir)  # the workers' environment (Stack._env)
    stack.nats = SyncedNats(store) if variant.nats == "always" else EmbeddedNats(store)
    stack.service_processes, stack.workers = variant.processes, []
    await stack.start()
    db = await asyncpg.connect(stack.database_url)
    engine = Engine(stack, db, variant)
    engine.stage_dir = stage_dir
    try:
        await settle(stack.pg.url("postgres"))
        return await measure(engine, args, profile, postgres=postgres_cpu(stack))
    finally:
        await engine.close()
        await db.close()
        engine.stop_workers()
        stack.nats.stop()


async def main(args: argparse.Namespace) -> None:
    chosen = args.only.split(",")
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-peers-"))
    stack = Stack(root)
    results = Results()
    started = time.monotonic()
    try:
        stack.pg.start()
        if "pgqueuer" in chosen:
            results.pgqueuer = await run_peer(stack, root, "pgqueuer", 0, args)
        if "procrastinate" in chosen:
            for concurrency in args.procrastinate_concurrency:
                # the sweep looks for the best latency: the drain at the default only
                drain = concurrency == args.procrastinate_concurrency[0]
                figures = await run_peer(stack, root, "procrastinate", concurrency, args, drain)
                results.procrastinate.append((concurrency, figures))
        if "engine" in chosen:
            for n, variant in enumerate(engine_variants(args)):
                # py-spy on the first variant's drain only: it slows what it samples
                profile = args.profile if n == 0 else None
                results.engines.append((variant, await run_engine(stack, variant, args, profile)))
    except BaseException:
        stack.stop()
        print(f"failed; the processes' logs are in {root}", file=sys.stderr)
        raise
    stack.stop()
    shutil.rmtree(root, ignore_errors=True)
    report(args, results, time.monotonic() - started)


def postgres_cpu(stack: Stack) -> Callable[[], float]:
    """The embedded PostgreSQL's CPU seconds so far: the postmaster, its backends and the
    backends it has reaped."""
    return trees(lambda: [pid] if (pid := stack.pg.pid) is not None else [])


def engine_variants(args: argparse.Namespace) -> list[EngineVariant]:
    return [EngineVariant(n, p) for n in args.nats for p in args.service_processes]


def report(args: argparse.Namespace, results: Results, elapsed_s: float) -> None:
    print(f"\nSide by side: synthetic no-op jobs, {WORKERS} worker processes each, one")
    print(f"embedded PostgreSQL (fsync on), {os.cpu_count()} cores; NATS JetStream for the")
    print("engine at nats-server's defaults (sync_interval 2 min) or as deployed (always).")
    print(f"{'system':<30}{'drain jobs/s':>14}{'p50 ms':>10}{'p99 ms':>10}")
    rows: list[tuple[str, Figures]] = [(v.label, f) for v, f in results.engines]
    if results.pgqueuer:
        rows.append(("pgqueuer", results.pgqueuer))
    rows += [(f"procrastinate -c {c}", f) for c, f in results.procrastinate]
    for label, f in rows:
        drain = "-" if math.isnan(f.drain) else f"{f.drain:,.0f}"
        print(f"{label:<30}{drain:>14}{f.p50:>10.1f}{f.p99:>10.1f}")
    print(f"(drain: {args.jobs} jobs; steady: {args.rate:.0f}/s for {args.seconds:.0f} s)")

    peers = _peer_columns(results)
    if results.engines and peers:
        print("\nThis engine's figure / the peer's (drain: higher is better; p50, p99: lower):")
        print(f"{'':<30}" + "".join(f"{heading:>16}" for heading, _ in peers))
        for variant, f in results.engines:
            line = "".join(f"{ratio(f):>16.2f}" for _, ratio in peers)
            print(f"{variant.label:<30}{line}")
        if results.procrastinate:
            best50 = min(results.procrastinate, key=lambda cf: cf[1].p50)
            best99 = min(results.procrastinate, key=lambda cf: cf[1].p99)
            print(
                f"(procrastinate at its best: p50 at -c {best50[0]}, p99 at -c {best99[0]};"
                f" its default is -c {results.procrastinate[0][0]})"
            )

    report_cpu(rows, results.pgqueuer)
    for variant, f in results.engines:
        if f.stages:
            print(f"\n{variant.label}, steady phase, time since the job's create (ms):")
            print(f"{'stage':<58}{'p50':>8}{'p99':>8}{'jobs':>7}")
            for label, p50, p99, count in f.stages:
                print(f"{label:<58}{p50:>8.1f}{p99:>8.1f}{count:>7}")
        if variant.processes > 1:
            print(f"connections per job_service process at the end: {f.spread}")
        if f.profile:
            print(f"\n{variant.label}, processes during the drain (py-spy, in {args.profile}):")
            print(f.profile)
    print(f"\n(the run took {elapsed_s / 60:.1f} min)")


CPU_GROUPS = ("postgres", "job_service", "workers", "nats")


def report_cpu(rows: list[tuple[str, Figures]], pgqueuer: Figures | None) -> None:
    """CPU ms per job, per phase: the system's processes together (PostgreSQL included),
    each group, the load generator, the whole machine (other sessions' work included)."""
    print("\nCPU ms per job (user + system, from /proc; system = its processes, PostgreSQL")
    print("included, the load generator not; machine = every core, other sessions included):")
    heading = "".join(f"{g:>12}" for g in (*CPU_GROUPS, "client", MACHINE))
    print(f"{'system, phase':<36}{'system':>9}{'÷ pgq':>7}{heading}")
    for label, f in rows:
        for phase, cpu in f.cpu.items():
            total = sum(cpu.get(g, 0.0) for g in CPU_GROUPS)
            base = pgqueuer.cpu.get(phase, {}) if pgqueuer is not None else {}
            base_total = sum(base.get(g, 0.0) for g in CPU_GROUPS)
            ratio = f"{total / base_total:.2f}" if base_total else "-"
            cells = "".join(
                f"{cpu[g]:>12.3f}" if g in cpu else f"{'-':>12}"
                for g in (*CPU_GROUPS, "client", MACHINE)
            )
            print(f"{label + ', ' + phase:<36}{total:>9.3f}{ratio:>7}{cells}")


def _peer_columns(results: Results) -> list[tuple[str, Callable[[Figures], float]]]:
    """The ratio columns: each the engine's figure over a peer's."""
    columns: list[tuple[str, Callable[[Figures], float]]] = []
    pgq = results.pgqueuer
    if pgq is not None:
        columns += [
            ("drain ÷ pgq", lambda f: f.drain / pgq.drain),
            ("p50 ÷ pgq", lambda f: f.p50 / pgq.p50),
            ("p99 ÷ pgq", lambda f: f.p99 / pgq.p99),
        ]
    if results.procrastinate:
        default = results.procrastinate[0][1]
        best50 = min(f.p50 for _, f in results.procrastinate)
        best99 = min(f.p99 for _, f in results.procrastinate)
        columns += [
            ("p50 ÷ pc best", lambda f: f.p50 / best50),
            ("p99 ÷ pc best", lambda f: f.p99 / best99),
            ("p50 ÷ pc dflt", lambda f: f.p50 / default.p50),
            ("p99 ÷ pc dflt", lambda f: f.p99 / default.p99),
        ]
    return columns


def _ints(text: str) -> list[int]:
    """ "1,4,16": positive integers."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of positive integers")
    return values


def _nats_modes(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",")]
    if not set(values) <= {"default", "always"}:
        raise argparse.ArgumentTypeError("default, always or both, comma-separated")
    return values


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="backlog to drain")
    parser.add_argument("--rate", type=float, default=200.0, help="steady phase jobs/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady phase length")
    parser.add_argument(
        "--only", default="engine,pgqueuer,procrastinate", help="comma-separated systems"
    )
    parser.add_argument(
        "--nats",
        type=_nats_modes,
        default="default,always",
        help="the engine's NATS: at nats-server's default sync_interval and/or at 'always'",
    )
    parser.add_argument(
        "--service-processes",
        type=_ints,
        default="1",
        help="JOBS_SERVICE_PROCESSES of the engine's job_service; a list runs each, in order",
    )
    parser.add_argument(
        "--procrastinate-concurrency",
        type=_ints,
        default=PROCRASTINATE_CONCURRENCY,
        help="jobs at once per procrastinate worker, each run in turn (first: its default)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="record job_service and the workers with py-spy during the engine's drain here",
    )
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
