"""Schedule fire lag: slot time to job created, with two job_service replicas.

    python -m bench.schedules                         # defaults below
    python -m bench.schedules --schedules 50 --seconds 60 --replicas 2 --load 50

It starts a private PostgreSQL (durable defaults: fsync on) and NATS JetStream, and
REPLICAS job_service processes as ``make run`` does (no worker: the jobs only need to be
created), creates SCHEDULES schedules firing every second (overlap ALLOW, so every slot
creates a job), lets them run SECONDS seconds while a client creates LOAD ordinary jobs per
second through CreateJob (API traffic beside the firing), then reads from the database:

- fire lag per slot, ``schedule_runs.recorded_at - slot`` (recorded_at is written with
  clock_timestamp() just before the round commits) and ``jobs.created_at - slot`` (the
  round's transaction start): p50, p90, p99, max;
- exactly once: slots with more than one job, and gaps (a missing second) per schedule.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import uvloop

from bench.e2e import CLIENT_TOKEN, Stack
from devstack.embedded import free_port
from shared.grpc_client import ChannelConfig, aio_channel
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc, schedule_service_pb2_grpc
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import struct_from_dict

LAGS = """
SELECT extract(epoch FROM r.recorded_at - r.slot) AS recorded,
       extract(epoch FROM j.created_at - r.slot) AS created
FROM schedule_runs r JOIN jobs j ON j.id = r.job_id
WHERE r.outcome = 'fired'
"""
PER_SLOT = """
SELECT schedule_id::text AS schedule_id, scheduled_for, count(*) AS n FROM jobs
WHERE schedule_id IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2
"""


class ReplicatedStack(Stack):
    """bench.e2e's stack with more job_service replicas on the same database and NATS."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.replicas: list[subprocess.Popen[bytes]] = []

    def start_replica(self) -> int:
        port = free_port()
        env = {**self._env(), "JOBS_GRPC_PORT": str(port)}
        log = (self.root / f"job_service-replica-{len(self.replicas)}.log").open("wb")
        self.replicas.append(
            subprocess.Popen(
                [sys.executable, "-m", "job_service", "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        return port

    def stop(self) -> None:
        for process in self.replicas:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.replicas:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        super().stop()


def quantiles(values: list[float]) -> str:
    values = sorted(values)
    if not values:
        return "none"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return (
        f"p50 {cuts[49] * 1000:7.1f} ms  p90 {cuts[89] * 1000:7.1f} ms  "
        f"p99 {cuts[98] * 1000:7.1f} ms  max {values[-1] * 1000:7.1f} ms  (n={len(values)})"
    )


async def serving(target: str) -> None:
    deadline = time.monotonic() + 60
    async with aio_channel(ChannelConfig(target=target, token=CLIENT_TOKEN)) as channel:
        stub = schedule_service_pb2_grpc.ScheduleServiceStub(channel)
        while True:
            try:
                await stub.ListSchedules(spb.ListSchedulesRequest(user_id="probe"), timeout=2)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def load(target: str, rate: float, until: float) -> int:
    """Ordinary CreateJob traffic at ``rate`` per second until ``until`` (monotonic)."""
    if rate <= 0:
        return 0
    created = 0
    async with aio_channel(ChannelConfig(target=target, token=CLIENT_TOKEN)) as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        start = time.monotonic()
        while time.monotonic() < until:
            await stub.CreateJob(
                jpb.CreateJobRequest(
                    user_id=f"bench-load-{created % 50}",
                    job_type="synthetic",
                    input=struct_from_dict({}),
                )
            )
            created += 1
            ahead = start + created / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
    return created


async def run(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-schedules-"))
    stack = ReplicatedStack(root)
    try:
        await stack.start()
        ports = [stack.port]
        for _ in range(args.replicas - 1):
            ports.append(stack.start_replica())
        target = f"127.0.0.1:{ports[0]}"
        await asyncio.gather(*(serving(f"127.0.0.1:{port}") for port in ports[1:]))
        async with aio_channel(ChannelConfig(target=target, token=CLIENT_TOKEN)) as channel:
            stub = schedule_service_pb2_grpc.ScheduleServiceStub(channel)
            for n in range(args.schedules):
                await stub.CreateSchedule(
                    spb.CreateScheduleRequest(
                        user_id=f"bench-sched-{n}",
                        spec=spb.ScheduleSpec(
                            cron="* * * * * *",
                            job_template=spb.JobTemplate(
                                job_type="synthetic", input=struct_from_dict({})
                            ),
                            overlap_policy=spb.OVERLAP_POLICY_ALLOW,
                        ),
                    )
                )
        print(
            f"{args.schedules} schedules every second, {args.replicas} replicas, "
            f"{args.load} CreateJob/s beside them, {args.seconds} s"
        )
        until = time.monotonic() + args.seconds
        created = await load(target, args.load, until)
        await asyncio.sleep(max(0.0, until - time.monotonic()))
        conn = await asyncpg.connect(stack.database_url)
        try:
            await conn.execute("UPDATE schedules SET paused = true")
            lags = await conn.fetch(LAGS)
            per_slot = await conn.fetch(PER_SLOT)
        finally:
            await conn.close()
        twice = sum(1 for r in per_slot if r["n"] > 1)
        gaps = 0
        for _, rows in itertools.groupby(per_slot, key=lambda r: r["schedule_id"]):
            times = [r["scheduled_for"] for r in rows]
            gaps += sum(1 for a, b in itertools.pairwise(times) if (b - a).total_seconds() != 1)
        print(f"API jobs created beside:  {created}")
        print(f"fire lag (run recorded):  {quantiles([float(r['recorded']) for r in lags])}")
        print(f"fire lag (job created_at): {quantiles([float(r['created']) for r in lags])}")
        print(f"slots fired twice: {twice}; gaps: {gaps}")
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--load", type=float, default=20.0, help="CreateJob calls per second")
    uvloop.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
