"""Memory: one worker holding 1,000 jobs at once, and the services across three drains.

    make bench-memory                                   # python -m bench.memory
    python -m bench.memory --in-flight 200 --drain 1000 # a smoke run

It starts the stack as ``make bench`` does with one worker process given IN_FLIGHT slots,
and reads resident set sizes (``VmRSS`` of /proc/<pid>/status):

1. the worker idle, then with IN_FLIGHT synthetic jobs running at once (each sleeps long
   enough for all to be in flight): bytes per job in flight = the difference / IN_FLIGHT;
2. three back-to-back drains of DRAIN no-op jobs (created in batches, then run): the
   highest job_service and worker RSS during each drain and both after it. Memory that
   grows from drain to drain and is not given back would show here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import uvloop

from bench.e2e import Stack, channel, wait_for
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import struct_from_dict

QUEUE = "ai-interactive"
USERS = 250  # at most 100 unfinished jobs per user (the default quota)
BATCH = 500


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def create(stub: job_service_pb2_grpc.JobServiceStub, n: int, tag: str, **job: int) -> None:
    payload = struct_from_dict(dict(job))
    for start in range(0, n, BATCH):
        requests = [
            jpb.CreateJobRequest(
                user_id=f"mem-{tag}-{i % USERS}", job_type="synthetic", input=payload
            )
            for i in range(start, min(n, start + BATCH))
        ]
        response = await stub.CreateJobs(jpb.CreateJobsRequest(requests=requests))
        refused = [r.error.message for r in response.results if r.HasField("error")]
        if refused:
            raise RuntimeError(f"CreateJobs refused {len(refused)}: {refused[0]}")


async def count(db: asyncpg.Connection, tag: str, status: str) -> int:
    return int(
        await db.fetchval(
            "SELECT count(*) FROM jobs WHERE user_id LIKE $1 AND status = $2",
            f"mem-{tag}-%",
            status,
        )
    )


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-memory-"))
    os.environ["JOBS_WORKER_SLOTS"] = f"{QUEUE}={args.in_flight}"
    stack = Stack(root)
    lines: list[str] = []
    try:
        await stack.start()
        stack.start_worker()
        service, worker = stack.service, stack.workers[0]
        assert service is not None
        PROCESSES.extend([service, worker])
        db = await asyncpg.connect(stack.database_url)
        async with channel(stack.port) as client_channel:
            stub = job_service_pb2_grpc.JobServiceStub(client_channel)
            await create(stub, 200, "warmup")
            await wait_for(lambda: _all(db, "warmup", 200), 300, "the warm-up jobs")
            idle = rss_mb(worker.pid)

            # Long enough for every job to be running at once on a loaded machine.
            await create(stub, args.in_flight, "held", sleep_ms=args.hold_s * 1000)
            await wait_for(
                lambda: _at_least(db, "held", "running", args.in_flight), 300, "jobs in flight"
            )
            await asyncio.sleep(1)  # let the answers' buffers settle into the heap
            holding = rss_mb(worker.pid)
            await wait_for(lambda: _all(db, "held", args.in_flight), args.hold_s + 300, "held jobs")
            lines.append(f"{'worker idle, MB':<44}{idle:>10.1f}")
            lines.append(
                f"{f'worker with {args.in_flight} jobs in flight, MB':<44}{holding:>10.1f}"
            )
            per_job = (holding - idle) * 1024 * 1024 / args.in_flight
            lines.append(f"{'bytes per job in flight':<44}{per_job:>10,.0f}")

            for n in range(1, 4):
                tag = f"drain{n}"
                await create(stub, args.drain, tag)
                peak_service = peak_worker = 0.0
                deadline = time.monotonic() + 900
                while not await _all(db, tag, args.drain):
                    peak_service = max(peak_service, rss_mb(service.pid))
                    peak_worker = max(peak_worker, rss_mb(worker.pid))
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"drain {n} did not finish")
                    await asyncio.sleep(0.2)
                lines.append(
                    f"drain {n} ({args.drain} jobs): job_service peak {peak_service:.1f} MB,"
                    f" after {rss_mb(service.pid):.1f}; worker peak {peak_worker:.1f},"
                    f" after {rss_mb(worker.pid):.1f}"
                )
        await db.close()
    except BaseException:
        stack.stop()
        print(f"failed; the processes' logs are in {root}", file=sys.stderr)
        raise
    stack.stop()
    shutil.rmtree(root, ignore_errors=True)
    print("\nMemory (resident set size), one worker process:")
    print("\n".join(lines))


PROCESSES: list[subprocess.Popen[bytes]] = []


def _alive() -> None:
    """A dead service or worker fails the run instead of leaving it waiting."""
    for process in PROCESSES:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")


async def _all(db: asyncpg.Connection, tag: str, n: int) -> bool:
    _alive()
    if await count(db, tag, "failed"):
        raise RuntimeError(f"{tag} jobs failed (a held job longer than its time limit?)")
    return await count(db, tag, "succeeded") >= n


async def _at_least(db: asyncpg.Connection, tag: str, status: str, n: int) -> bool:
    _alive()
    return await count(db, tag, status) >= n


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-flight", type=int, default=1000, help="jobs held at once")
    parser.add_argument(
        "--hold-s", type=int, default=20, help="how long each held job sleeps (< its 30 s limit)"
    )
    parser.add_argument("--drain", type=int, default=5000, help="jobs per drain")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
