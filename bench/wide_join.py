"""Wide-join benchmark: is a join over thousands of running, heartbeating jobs created in
one attempt? (issue 43: attaching took FOR SHARE NOWAIT on every dependency, which each
heartbeat conflicts with; 2,000 running dependencies cost 1-31 tries per join.)

    python -m bench.wide_join                     # 10 joins over 10,000 running jobs
    python -m bench.wide_join --wide 2000 --joins 10

It starts the stack as ``bench.e2e`` does (a private PostgreSQL with fsync on, NATS
JetStream, job_service), creates ``--wide`` jobs and locks them all (LockJobs, as workers
``bench-w0``..): they are running. Then it plays those workers' heartbeats: ``--beaters``
callers send Heartbeat for each attempt in turn, as fast as the job service answers
(durable commits, one UPDATE of the job's row each), for the whole run. Meanwhile it creates
``--joins`` joins, one after another, each waiting for every running job.

A try that finds a dependency's row locked fails with "could not obtain lock on row" in
PostgreSQL's log (NOWAIT) and is run again by the job service: the tries of a join are one
plus the lines its CreateJob added to the log. Figures: the tries per join, each join's
CreateJob time, and the heartbeats committed per second meanwhile (each attempt's interval
between beats follows from it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg
import uvloop

from bench.e2e import WORKER_TOKEN, Stack, channel
from bench.fan_in import USER, join
from shared.grpc_client import ChannelConfig, aio_channel
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import executor_service_pb2_grpc, job_service_pb2_grpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import default_registry

LOCK_BATCH = 256  # LockJobs takes at most 256
CREATE_BATCH = 500
WORKERS = 4
BUSY_ROW = "could not obtain lock on row"
# The dependencies' type: synthetic's spec with the longest timeout, so that no attempt
# ends (and no reaper's end conflicts with an attach, rightly) while the joins are made.
HELD = "bench_held"
# Leases that outlive the run: what changes a running job's row is its heartbeats alone.
LEASE_TTL_S = "900"


async def declare_held(executor: executor_service_pb2_grpc.ExecutorServiceStub) -> None:
    spec = spec_of(default_registry().get("synthetic"))
    spec.job_type, spec.timeout_seconds = HELD, 600.0
    await executor.DeclareJobType(epb.DeclareJobTypeRequest(worker_id="bench", spec=spec))


async def create_held(stub: job_service_pb2_grpc.JobServiceStub, n: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, CREATE_BATCH):
        requests = [
            jpb.CreateJobRequest(
                user_id=USER, job_type=HELD, input=struct_from_dict({"sleep_ms": 0})
            )
            for _ in range(min(CREATE_BATCH, n - start))
        ]
        answer = await stub.CreateJobs(jpb.CreateJobsRequest(requests=requests))
        refused = [r.error.message for r in answer.results if r.HasField("error")]
        if refused:
            raise RuntimeError(f"CreateJobs refused {len(refused)}: {refused[0]}")
        ids += [r.response.job.id for r in answer.results]
    return ids


async def lock_all(
    executor: executor_service_pb2_grpc.ExecutorServiceStub, job_ids: list[str]
) -> list[tuple[str, str]]:
    """Every job locked by one of WORKERS workers: (job id, lease token) each."""
    leases: list[tuple[str, str]] = []
    for start in range(0, len(job_ids), LOCK_BATCH):
        batch = job_ids[start : start + LOCK_BATCH]
        worker_id = f"bench-w{start // LOCK_BATCH % WORKERS}"
        answer = await executor.LockJobs(
            epb.LockJobsRequest(
                requests=[epb.LockJobRequest(job_id=j, worker_id=worker_id) for j in batch]
            )
        )
        for job_id, response in zip(batch, answer.responses, strict=True):
            if response.outcome != epb.LOCK_OUTCOME_LOCKED:
                raise RuntimeError(f"{job_id} was not granted: {response.outcome}")
            leases.append((job_id, response.job.lease_token))
    return leases


class Beaters:
    """Heartbeats for every lease, round after round, from ``callers`` callers at once."""

    def __init__(
        self,
        executor: executor_service_pb2_grpc.ExecutorServiceStub,
        leases: list[tuple[str, str]],
        callers: int,
    ) -> None:
        self._executor = executor
        self._leases = leases
        self._callers = callers
        self._next = 0
        self.beats = 0
        self.failed = 0
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._caller()) for _ in range(self._callers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _caller(self) -> None:
        while True:
            job_id, token = self._leases[self._next % len(self._leases)]
            self._next += 1
            try:
                await self._executor.Heartbeat(
                    epb.HeartbeatRequest(job_id=job_id, lease_token=token, progress=-1)
                )
                self.beats += 1
            except Exception:  # a lost lease would end the run's point: counted, reported
                self.failed += 1


def busy_rows(pg_log: Path) -> int:
    return pg_log.read_text(errors="replace").count(BUSY_ROW) if pg_log.exists() else 0


async def main(args: argparse.Namespace) -> None:
    # one user holds every job of the run: no per-user limit on unfinished jobs
    os.environ["JOBS_MAX_ACTIVE_JOBS_PER_USER"] = "0"
    os.environ["JOBS_DAILY_JOB_QUOTA_PER_USER"] = "0"
    os.environ["JOBS_LEASE_TTL_S"] = LEASE_TTL_S
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-wide-join-"))
    stack = Stack(root)
    pg_log = root / "pg" / "postgresql.log"
    try:
        await stack.start()
        db = await asyncpg.connect(stack.database_url)
        worker = aio_channel(ChannelConfig(target=f"127.0.0.1:{stack.port}", token=WORKER_TOKEN))
        async with channel(stack.port) as client_channel, worker:
            stub = job_service_pb2_grpc.JobServiceStub(client_channel)
            executor = executor_service_pb2_grpc.ExecutorServiceStub(worker)
            await declare_held(executor)
            deps = await create_held(stub, args.wide)
            leases = await lock_all(executor, deps)
            beaters = Beaters(executor, leases, args.beaters)
            beaters.start()
            await asyncio.sleep(args.warm_up_s)
            beats_before, started = beaters.beats, time.perf_counter()
            tries: list[int] = []
            seconds: list[float] = []
            for _ in range(args.joins):
                busy = busy_rows(pg_log)
                _, took = await join(stub, deps)
                seconds.append(took)
                tries.append(1 + busy_rows(pg_log) - busy)
            window = time.perf_counter() - started
            beats = beaters.beats - beats_before
            await beaters.stop()
            running = await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'running'")
        report = {
            "running_dependencies": args.wide,
            "still_running_at_the_end": running,
            "joins": args.joins,
            "tries_per_join": tries,
            "joins_on_the_first_try": sum(1 for t in tries if t == 1),
            "create_join_s": {
                "median": round(statistics.median(seconds), 3),
                "max": round(max(seconds), 3),
            },
            "heartbeats_per_s_meanwhile": round(beats / window, 1),
            "seconds_between_a_jobs_beats": round(args.wide / (beats / window), 2),
            "heartbeats_failed": beaters.failed,
        }
        print(json.dumps(report, indent=2))
    except Exception:
        for log in (root / "job_service-0.log", pg_log):
            if log.exists():  # what the service and the database said, for the report
                print(log.read_text()[-6000:])
        raise
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wide", type=int, default=10_000, help="running dependencies")
    parser.add_argument("--joins", type=int, default=10, help="joins created, one at a time")
    parser.add_argument("--beaters", type=int, default=32, help="heartbeat callers at once")
    parser.add_argument("--warm-up-s", type=float, default=2.0, help="beats before the joins")
    uvloop.run(main(parser.parse_args()))
