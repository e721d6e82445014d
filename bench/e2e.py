"""End-to-end benchmark: synthetic no-op jobs through the real stack on this machine.

    make bench                      # defaults below
    python -m bench.e2e --jobs 2000 --rate 200 --seconds 10 --workers 1

It starts a private PostgreSQL (durable defaults: fsync on) and NATS JetStream, job_service
and worker processes exactly as ``make run`` does, and measures:

1. create          CreateJob calls/s with no worker running (64 in flight)
1b. create batched CreateJobs: jobs/s in batches of 500 (4 calls in flight), no worker
2. backlog drain   that backlog executed: jobs/s from the first lock to the last success
3. create+process  jobs created and executed together: jobs/s from first create to last success
4. steady          create→succeeded latency p50/p99 at a steady rate (default 200 jobs/s),
                   and the CPU job_service and the workers spent per job in that phase

and, as a health check of the runs, the drain rate of the backlog's first 99 % (without
its stragglers), how many jobs the dispatch reconciler had to re-send
(their dispatch was lost or dropped, so they waited JOBS_RECONCILE_AFTER_S, 30 s) and the
longest create→start wait of the create+process and steady phases.

The stack runs as deployed: every call authenticated (bearer tokens, role checks) and the
per-user quotas on at their defaults; each phase spreads its jobs over USERS users, as a
product's traffic would be (one user with thousands of unfinished jobs would hit the
default limit of 100).

Timings of jobs come from the database clock (created_at, started_at, finished_at). The
machine is shared and noisy, so the figures that matter are ratios within one run: each
throughput is also shown against a PostgreSQL ceiling measured here and now (plain
asyncpg transactions inserting two rows, 8 connections), the cost floor of any durable
job queue on this database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import grpc
import uvloop

from bench.cpu_meter import tree_cpu_s
from devstack.embedded import EmbeddedNats, EmbeddedPostgres, ensure_database, free_port
from shared.grpc_client import ChannelConfig, aio_channel
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import executor_service_pb2_grpc, job_service_pb2_grpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import default_registry

IN_FLIGHT = 64
USERS = 100
NOOP = struct_from_dict({})
CLIENT_TOKEN = "bench-client-token-0000"
WORKER_TOKEN = "bench-worker-token-0000"
TOKENS = json.dumps(
    {
        CLIENT_TOKEN: {"principal": "bench", "roles": ["client"]},
        WORKER_TOKEN: {"principal": "bench-worker", "roles": ["worker"]},
    }
)


def user(tag: str, i: int) -> str:
    return f"bench-{tag}-{i % USERS}"


def channel(port: int) -> grpc.aio.Channel:
    return aio_channel(ChannelConfig(target=f"127.0.0.1:{port}", token=CLIENT_TOKEN))


class Stack:
    """PostgreSQL, NATS, job_service and workers, started and stopped like ``make run``."""

    def __init__(self, root: Path, service_processes: int = 1) -> None:
        self.root = root
        self.service_processes = service_processes  # JOBS_SERVICE_PROCESSES
        self.pg = EmbeddedPostgres(root / "pg")
        self.nats = EmbeddedNats(root / "nats")
        self.port = free_port()
        self.workers: list[subprocess.Popen[bytes]] = []
        self.service: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.pg.start()
        self.nats.start()
        await ensure_database(self.pg.url("postgres"), "jobs")
        self.database_url = self.pg.url("jobs")
        migrate = [sys.executable, "-m", "job_service", "migrate"]
        await asyncio.to_thread(subprocess.run, migrate, env=self._env(), check=True)
        self.service = self._spawn("job_service", "serve")
        await self._wait_serving()
        await self._declare()

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time (user + system) used so far by job_service and by the workers: per job,
        a figure far steadier than a latency on a shared machine."""
        return (
            sum(map(_cpu_seconds, self.service_pids())),
            sum(_cpu_seconds(w.pid) for w in self.workers),
        )

    def postgres_cpu_seconds(self) -> float:
        """CPU time used so far by PostgreSQL: the postmaster, its backends and those it
        reaped."""
        pid = self.pg.pid
        return tree_cpu_s(pid) if pid is not None else 0.0

    def service_pids(self) -> list[int]:
        """job_service's processes: the one started and the replicas it started."""
        if self.service is None or self.service.poll() is not None:
            return []
        pid = self.service.pid
        return [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]

    def start_worker(self) -> None:
        self.workers.append(self._spawn("worker_service"))

    def stop(self) -> None:
        for process in [*self.workers, self.service]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.workers, self.service]:
            if process is not None:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.nats.stop()
        self.pg.stop()

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "JOBS_DATABASE_URL": self.pg.url("jobs"),
            "JOBS_NATS_URL": self.nats.url,
            "JOBS_GRPC_PORT": str(self.port),
            "JOBS_SERVICE_PROCESSES": str(self.service_processes),
            "JOBS_JOB_SERVICE_TARGET": f"127.0.0.1:{self.port}",
            "JOBS_LOG_LEVEL": "WARNING",
            "JOBS_AUTH_TOKENS": TOKENS,
            "JOBS_AUTH_TOKEN": WORKER_TOKEN,
            # served (as in production) on ephemeral ports: several workers run at once
            "JOBS_METRICS_PORT": "0",
            "JOBS_WORKER_METRICS_PORT": "0",
        }

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        log = (self.root / f"{args[0]}-{len(self.workers)}.log").open("wb")
        return subprocess.Popen(
            [sys.executable, "-m", *args], env=self._env(), stdout=log, stderr=subprocess.STDOUT
        )

    async def _declare(self) -> None:
        """The shipped job types declared as a worker declares them: the job service runs
        no job type code and refuses a job of a type no worker has declared, and the
        backlogs are created before any worker starts."""
        config = ChannelConfig(target=f"127.0.0.1:{self.port}", token=WORKER_TOKEN)
        async with aio_channel(config) as declaring:
            stub = executor_service_pb2_grpc.ExecutorServiceStub(declaring)
            for definition in default_registry():
                await stub.DeclareJobType(
                    epb.DeclareJobTypeRequest(worker_id="bench", spec=spec_of(definition))
                )

    async def _wait_serving(self) -> None:
        deadline = time.monotonic() + 60
        async with channel(self.port) as ready:
            while True:
                try:
                    await asyncio.wait_for(ready.channel_ready(), 1)
                    return
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("job_service did not start") from None


async def create(stub: job_service_pb2_grpc.JobServiceStub, n: int, tag: str) -> float:
    """Creates n no-op jobs with IN_FLIGHT calls at once; returns creates/s."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def caller() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            await stub.CreateJob(
                jpb.CreateJobRequest(user_id=user(tag, i), job_type="synthetic", input=NOOP)
            )

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))
    return n / (time.perf_counter() - started)


BATCH = 500
BATCHES_IN_FLIGHT = 4


async def create_batched(stub: job_service_pb2_grpc.JobServiceStub, n: int, tag: str) -> float:
    """Creates n no-op jobs with CreateJobs, BATCH per call; returns jobs/s."""
    batches = [range(start, min(n, start + BATCH)) for start in range(0, n, BATCH)]

    async def caller() -> None:
        while batches:
            numbers = batches.pop()
            response = await stub.CreateJobs(
                jpb.CreateJobsRequest(
                    requests=[
                        jpb.CreateJobRequest(user_id=user(tag, i), job_type="synthetic", input=NOOP)
                        for i in numbers
                    ]
                )
            )
            refused = [r.error.message for r in response.results if r.HasField("error")]
            if refused:
                raise RuntimeError(f"CreateJobs refused {len(refused)}: {refused[0]}")

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(BATCHES_IN_FLIGHT)))
    return n / (time.perf_counter() - started)


async def wait_for(predicate: Callable[[], Awaitable[bool]], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def all_succeeded(db: asyncpg.Connection, tag: str, n: int) -> bool:
    done = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE user_id LIKE $1 AND status = 'succeeded'",
        f"bench-{tag}-%",
    )
    return done >= n


async def span(db: asyncpg.Connection, tag: str, start_column: str) -> float:
    seconds = await db.fetchval(
        f"SELECT extract(epoch FROM max(finished_at) - min({start_column}))"
        " FROM jobs WHERE user_id LIKE $1",
        f"bench-{tag}-%",
    )
    return float(seconds)


async def postgres_ceiling(url: str, seconds: float = 3.0) -> float:
    """Two-row insert transactions/s over 8 connections: the durable-write floor."""
    setup = await asyncpg.connect(url)
    await setup.execute(
        "CREATE TABLE IF NOT EXISTS bench_a (id bigserial PRIMARY KEY, v text);"
        "CREATE TABLE IF NOT EXISTS bench_b (id bigserial PRIMARY KEY, v text)"
    )
    await setup.close()
    count = 0
    stop_at = time.perf_counter() + seconds

    async def writer() -> None:
        nonlocal count
        conn = await asyncpg.connect(url)
        try:
            while time.perf_counter() < stop_at:
                async with conn.transaction():
                    await conn.execute("INSERT INTO bench_a (v) VALUES ('x')")
                    await conn.execute("INSERT INTO bench_b (v) VALUES ('x')")
                count += 1
        finally:
            await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(8)))
    return count / (time.perf_counter() - started)


def _per_job(before: tuple[float, float], stack: Stack, jobs: int) -> tuple[float, float]:
    """job_service's and PostgreSQL's CPU ms per job since ``before``."""
    service, postgres = stack.cpu_seconds()[0], stack.postgres_cpu_seconds()
    return ((service - before[0]) * 1000 / jobs, (postgres - before[1]) * 1000 / jobs)


def _cpu_seconds(pid: int) -> float:
    # /proc/<pid>/stat: utime and stime are fields 14 and 15, in clock ticks
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def steady(
    stub: job_service_pb2_grpc.JobServiceStub,
    db: asyncpg.Connection,
    rate: float,
    seconds: float,
) -> tuple[float, float, int]:
    """Creates jobs at ``rate``/s for ``seconds``; returns p50 and p99 latency (ms)."""
    n = int(rate * seconds)
    started = time.perf_counter()
    calls = []
    for i in range(n):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        calls.append(
            asyncio.ensure_future(
                stub.CreateJob(
                    jpb.CreateJobRequest(
                        user_id=user("steady", i), job_type="synthetic", input=NOOP
                    )
                )
            )
        )
    await asyncio.gather(*calls)
    await wait_for(lambda: all_succeeded(db, "steady", n), 120, "the steady jobs")
    rows = await db.fetch(
        "SELECT extract(epoch FROM finished_at - created_at) * 1000 AS ms FROM jobs"
        " WHERE user_id LIKE 'bench-steady-%'"
    )
    latencies = sorted(float(r["ms"]) for r in rows)
    cuts = statistics.quantiles(latencies, n=100)
    return cuts[49], cuts[98], n


async def first_99(db: asyncpg.Connection, tag: str) -> float:
    """jobs/s of the first 99 % of a backlog to finish, from its first start: the drain
    rate without the stragglers (a job whose dispatch was lost waits for the reconciler)."""
    seconds = await db.fetchval(
        "SELECT extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY finished_at)"
        " - min(started_at)) FROM jobs WHERE user_id LIKE $1",
        f"bench-{tag}-%",
    )
    count = await db.fetchval("SELECT count(*) FROM jobs WHERE user_id LIKE $1", f"bench-{tag}-%")
    return 0.99 * int(count) / float(seconds)


async def lost_dispatches(db: asyncpg.Connection) -> tuple[int, float]:
    """Jobs whose dispatch the reconciler had to re-send (a dispatch lost or dropped: the
    job waited JOBS_RECONCILE_AFTER_S for it), and the longest create→start wait of the
    phases where jobs are picked up as they come (create+process, steady), in s."""
    resent = await db.fetchval(
        "SELECT count(DISTINCT aggregate_id) FROM outbox_events"
        " WHERE dedupe_key LIKE '%:redispatch:%'"
    )
    longest = await db.fetchval(
        "SELECT coalesce(max(extract(epoch FROM started_at - created_at)), 0) FROM jobs"
        " WHERE user_id LIKE 'bench-mixed-%' OR user_id LIKE 'bench-steady-%'"
    )
    return int(resent), float(longest)


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-"))
    stack = Stack(root, args.service_processes)
    try:
        await stack.start()
        ceiling = await postgres_ceiling(stack.database_url)
        db = await asyncpg.connect(stack.database_url)
        async with channel(stack.port) as client_channel:
            stub = job_service_pb2_grpc.JobServiceStub(client_channel)
            await create(stub, 200, "warmup")

            cpu_before = (stack.cpu_seconds()[0], stack.postgres_cpu_seconds())
            create_rate = await create(stub, args.jobs, "backlog")
            create_cpu = _per_job(cpu_before, stack, args.jobs)
            await create_batched(stub, 1000, "warmup-batched")
            batched_rate = await create_batched(stub, args.jobs, "batched")
            if args.create_only:
                await db.close()
                report_creates(args, ceiling, create_rate, batched_rate)
                return
            cpu_before = (stack.cpu_seconds()[0], stack.postgres_cpu_seconds())
            for _ in range(args.workers):
                stack.start_worker()
            await wait_for(lambda: all_succeeded(db, "warmup", 200), 120, "warm-up jobs")
            await wait_for(lambda: all_succeeded(db, "backlog", args.jobs), 600, "the backlog")
            drain = args.jobs / await span(db, "backlog", "started_at")
            drain99 = await first_99(db, "backlog")
            # the CreateJobs phase's jobs are not part of the next phases: let them finish
            for tag, n in (("warmup-batched", 1000), ("batched", args.jobs)):
                await wait_for(lambda t=tag, k=n: all_succeeded(db, t, k), 600, f"{tag} jobs")
            # every job waiting when the workers started, from their start to the last
            drain_cpu = _per_job(cpu_before, stack, 200 + args.jobs + 1000 + args.jobs)

            await create(stub, args.jobs, "mixed")
            await wait_for(lambda: all_succeeded(db, "mixed", args.jobs), 600, "mixed jobs")
            mixed = args.jobs / await span(db, "mixed", "created_at")

            cpu_before = stack.cpu_seconds()
            pg_before = stack.postgres_cpu_seconds()
            p50, p99, n = await steady(stub, db, args.rate, args.seconds)
            cpu_pg = (stack.postgres_cpu_seconds() - pg_before) / n * 1000
            cpu_service, cpu_workers = (
                (after - before) / n * 1000
                for before, after in zip(cpu_before, stack.cpu_seconds(), strict=True)
            )
            resent, longest = await lost_dispatches(db)
        await db.close()
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)

    report_creates(args, ceiling, create_rate, batched_rate)
    for name, value in (
        (f"backlog drain ({args.jobs} jobs)", drain),
        (f"create+process ({args.jobs} jobs)", mixed),
    ):
        print(f"{name + ' jobs/s':<34}{value:>14,.0f}{value / ceiling:>14.2f}")
    print(f"{f'steady {args.rate:.0f}/s x {n} jobs: p50 ms':<34}{p50:>14.1f}")
    print(f"{f'steady {args.rate:.0f}/s x {n} jobs: p99 ms':<34}{p99:>14.1f}")
    print(f"{'backlog drain, first 99 % jobs/s':<34}{drain99:>14,.0f}{drain99 / ceiling:>14.2f}")
    print(f"{'steady: job_service CPU ms per job':<34}{cpu_service:>14.2f}")
    print(f"{'steady: workers CPU ms per job':<34}{cpu_workers:>14.2f}")
    print(f"{'steady: postgres CPU ms per job':<34}{cpu_pg:>14.2f}")
    for phase, (service, postgres) in (("create", create_cpu), ("drain", drain_cpu)):
        print(f"{phase + ': job_service CPU ms/job':<34}{service:>14.2f}")
        print(f"{phase + ': postgres CPU ms/job':<34}{postgres:>14.2f}")
    print(f"{'jobs re-sent by the reconciler':<34}{resent:>14,}")
    print(f"{'longest wait to start, s':<34}{longest:>14.1f}")


def report_creates(
    args: argparse.Namespace, ceiling: float, create_rate: float, batched_rate: float
) -> None:
    print(f"\nEnd-to-end, synthetic no-op jobs, {args.workers} worker process(es),", end=" ")
    print(f"{args.service_processes} job_service process(es),", end=" ")
    print(f"{os.cpu_count()} cores")
    print(f"{'figure':<34}{'value':>14}{'x PG ceiling':>14}")
    print(f"{'PostgreSQL ceiling (2-row tx/s)':<34}{ceiling:>14,.0f}{1:>14.2f}")
    for name, value in (
        (f"create ({args.jobs} jobs, no worker)", create_rate),
        (f"CreateJobs x{BATCH} ({args.jobs} jobs)", batched_rate),
    ):
        print(f"{name + ' jobs/s':<34}{value:>14,.0f}{value / ceiling:>14.2f}")
    print(f"{'CreateJobs / CreateJob':<34}{batched_rate / create_rate:>14.1f}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per throughput phase")
    parser.add_argument("--rate", type=float, default=200.0, help="steady phase jobs/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady phase length")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--service-processes", type=int, default=1, help="JOBS_SERVICE_PROCESSES of job_service"
    )
    parser.add_argument(
        "--create-only", action="store_true", help="only the two create phases (no worker)"
    )
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
