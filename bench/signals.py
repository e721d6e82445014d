"""Signal benchmark: how long from SendSignal to the job's code holding the payload.

    python -m bench.signals                       # 1,000 signals to 100 running jobs
    python -m bench.signals --jobs 100 --per-job 10 --rate 100

It starts the stack as ``bench.e2e`` does (a private PostgreSQL with fsync on, NATS
JetStream, job_service and one worker process), creates ``--jobs`` synthetic jobs that each
wait for ``--per-job`` signals named "go" (``wait_signals``), waits until all of them run,
then sends the signals at a steady ``--rate`` per second, round robin over the jobs (each
call on its own, not waiting for the one before).

Latency of one signal = the worker's wall clock when job code received it (the synthetic
job records it in its output) minus this process's wall clock just before its SendSignal call
(one machine, one clock). It is the whole path: the send's commit, the core NATS notice,
the worker's FetchSignals under the lease, and job code waking up. It also prints the
SendSignal call alone (send → answer) and answer → job code sees it (the delivery after
the commit; negative when job code had the signal before the client had its answer). The
run checks that every job received exactly its signals, in send order. As a reference for
the machine's own tail, half as many GetJob calls (a read: no commit) at the same rate are
timed first.
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

from bench.e2e import Stack, channel, wait_for
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import struct_from_dict

USER = "bench-signals"


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-signals-"))
    stack = Stack(root)
    sent_at: dict[int, float] = {}
    took: list[float] = []
    answered_at: dict[int, float] = {}
    try:
        await stack.start()
        stack.start_worker()
        db = await asyncpg.connect(stack.database_url)
        async with channel(stack.port) as client_channel:
            stub = job_service_pb2_grpc.JobServiceStub(client_channel)
            job_ids = await create_jobs(stub, args)
            await wait_for(lambda: all_running(db, len(job_ids)), 120, "the jobs to start")
            # each job's code asks for its first signal as it starts (one fetch); give the
            # last ones a moment so that the first round measures delivery, not start-up
            await asyncio.sleep(1.0)
            reference = await get_jobs(stub, job_ids, args)
            # a steady rate, round robin over the jobs: each job's code is waiting for its
            # next signal when it comes (a burst would measure the queue in front of it)
            total = args.jobs * args.per_job
            t0 = time.monotonic()
            sends = []
            for k in range(total):
                await asyncio.sleep(max(0.0, t0 + k / args.rate - time.monotonic()))
                sends.append(
                    asyncio.create_task(
                        send(stub, job_ids[k % len(job_ids)], k, sent_at, took, answered_at)
                    )
                )
            await asyncio.gather(*sends)
            await wait_for(lambda: all_finished(db, len(job_ids)), 120, "the jobs to finish")
            outputs = await db.fetch(
                "SELECT id::text, status, validated_output FROM jobs WHERE user_id = $1", USER
            )
        await db.close()
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(args, outputs, sent_at, sorted(took), answered_at)
    print(f"{'reference: GetJob call p50 ms':<40}{statistics.median(reference):>12.1f}")
    print(f"{'reference: GetJob call p99 ms':<40}{reference[int(len(reference) * 0.99)]:>12.1f}")


async def create_jobs(
    stub: job_service_pb2_grpc.JobServiceStub, args: argparse.Namespace
) -> list[str]:
    job_input = struct_from_dict(
        {"wait_signals": ["go"] * args.per_job, "signal_timeout_ms": 60_000}
    )
    answers = await asyncio.gather(
        *(
            stub.CreateJob(
                jpb.CreateJobRequest(user_id=USER, job_type="synthetic", input=job_input)
            )
            for _ in range(args.jobs)
        )
    )
    return [a.job.id for a in answers]


async def get_jobs(
    stub: job_service_pb2_grpc.JobServiceStub, job_ids: list[str], args: argparse.Namespace
) -> list[float]:
    """A reference for the machine's tail: GetJob calls (a read, no commit) at the same
    rate, round robin over the same running jobs, before the signals; sorted ms."""
    took: list[float] = []

    async def one(job_id: str) -> None:
        started = time.perf_counter()
        await stub.GetJob(jpb.GetJobRequest(job_id=job_id, user_id=USER))
        took.append((time.perf_counter() - started) * 1000)

    t0 = time.monotonic()
    calls = []
    # half as many as signals: the jobs' attempts must outlive both phases (timeout 30 s)
    for k in range(args.jobs * args.per_job // 2):
        await asyncio.sleep(max(0.0, t0 + k / args.rate - time.monotonic()))
        calls.append(asyncio.create_task(one(job_ids[k % len(job_ids)])))
    await asyncio.gather(*calls)
    return sorted(took)


async def send(
    stub: job_service_pb2_grpc.JobServiceStub,
    job_id: str,
    k: int,
    sent_at: dict[int, float],
    took: list[float],
    answered_at: dict[int, float],
) -> None:
    sent_at[k] = time.time()
    await stub.SendSignal(
        jpb.SendSignalRequest(
            job_id=job_id, user_id=USER, name="go", payload=struct_from_dict({"k": k})
        )
    )
    answered_at[k] = time.time()
    took.append((answered_at[k] - sent_at[k]) * 1000)


async def all_running(db: asyncpg.Connection, n: int) -> bool:
    running = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE user_id = $1 AND status = 'running'", USER
    )
    return running >= n


async def all_finished(db: asyncpg.Connection, n: int) -> bool:
    done = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE user_id = $1"
        " AND status IN ('succeeded', 'failed', 'cancelled')",
        USER,
    )
    return done >= n


def report(
    args: argparse.Namespace,
    rows: list[asyncpg.Record],
    sent_at: dict[int, float],
    took: list[float],
    answered_at: dict[int, float],
) -> None:
    latencies: list[float] = []
    after_answer: list[float] = []
    failed = wrong = 0
    for row in rows:
        if row["status"] != "succeeded":
            failed += 1
            continue
        output = row["validated_output"]
        output = json.loads(output) if isinstance(output, str) else output
        received = [(int(s["payload"]["k"]), s["received_at"]) for s in output["signals"]]
        ks = [k for k, _ in received]
        if ks != sorted(ks) or len(set(ks)) != len(ks) or len(ks) != args.per_job:
            wrong += 1  # lost, duplicated or out of order
        latencies.extend((at - sent_at[k]) * 1000 for k, at in received)
        after_answer.extend((at - answered_at[k]) * 1000 for k, at in received)
    latencies.sort()
    total = args.jobs * args.per_job
    print(
        f"\nSignals: {total} to {args.jobs} running jobs at {args.rate:g}/s, {os.cpu_count()} cores"
    )
    print(f"{'figure':<40}{'value':>12}")
    print(f"{'signals received by job code':<40}{len(latencies):>12,}")
    print(f"{'jobs not succeeded':<40}{failed:>12}")
    print(f"{'jobs with a lost/duplicate/misordered':<40}{wrong:>12}")
    if latencies:
        p50 = statistics.median(latencies)
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f"{'send → job code sees it: p50 ms':<40}{p50:>12.1f}")
        print(f"{'send → job code sees it: p99 ms':<40}{p99:>12.1f}")
        print(f"{'send → job code sees it: max ms':<40}{latencies[-1]:>12.1f}")
    if after_answer:
        after_answer.sort()
        p99 = after_answer[min(len(after_answer) - 1, int(len(after_answer) * 0.99))]
        print(f"{'answer → job code sees it: p50 ms':<40}{statistics.median(after_answer):>12.1f}")
        print(f"{'answer → job code sees it: p99 ms':<40}{p99:>12.1f}")
    if took:
        print(f"{'SendSignal call: p50 ms':<40}{statistics.median(took):>12.1f}")
        print(f"{'SendSignal call: p99 ms':<40}{took[int(len(took) * 0.99)]:>12.1f}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100, help="running jobs")
    parser.add_argument("--per-job", type=int, default=10, help="signals per job")
    parser.add_argument("--rate", type=float, default=100.0, help="signals sent per second")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
