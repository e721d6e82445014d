"""Fan-in benchmark: does a join over many dependencies make each of their completions
dearer? (issue 30: the cost per finished dependency must be O(1), not a scan.)

    python -m bench.fan_in                    # joins of 10 and of 10,000; 200 completions each
    python -m bench.fan_in --wide 10000 --completions 200

It starts the stack as ``bench.e2e`` does (a private PostgreSQL with fsync on, NATS
JetStream, job_service; no worker: this process plays the worker, so that what is timed is
exactly one call), then times ``SubmitResult`` of ``--completions`` dependencies, each
locked first by ``LockJob`` (not timed), in three shapes, interleaved round by round so that
the machine's drift hits each alike:

- ``alone``: jobs nothing depends on (the baseline);
- ``narrow``: dependencies of joins of 10 (one join per 10 of them);
- ``wide``: dependencies of one join of ``--wide`` jobs.

Each dependency's completion counts it for its join in the same transaction (the trigger of
migration 0021), so ``wide``/``alone`` is the cost a wide join adds to each completion;
flat means it does not grow with the join's width. It also times the CreateJob of the wide
join (attaching ``--wide`` dependencies), and checks afterwards that each join counted
exactly the completions it saw.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg
import uvloop

from bench.e2e import WORKER_TOKEN, Stack, channel, wait_for
from shared.grpc_client import ChannelConfig, aio_channel
from shared.output_hash import output_hash
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import executor_service_pb2_grpc, job_service_pb2_grpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict

USER = "bench-fan-in"
OUTPUT = {"attempt": 1, "data": "x"}
BATCH = 500


async def create_many(stub: job_service_pb2_grpc.JobServiceStub, n: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, BATCH):
        requests = [
            jpb.CreateJobRequest(
                user_id=USER, job_type="synthetic", input=struct_from_dict({"sleep_ms": 0})
            )
            for _ in range(min(BATCH, n - start))
        ]
        answer = await stub.CreateJobs(jpb.CreateJobsRequest(requests=requests))
        refused = [r.error.message for r in answer.results if r.HasField("error")]
        if refused:
            raise RuntimeError(f"CreateJobs refused {len(refused)}: {refused[0]}")
        ids += [r.response.job.id for r in answer.results]
    return ids


async def join(
    stub: job_service_pb2_grpc.JobServiceStub, depends_on: list[str]
) -> tuple[str, float]:
    started = time.perf_counter()
    answer = await stub.CreateJob(
        jpb.CreateJobRequest(
            user_id=USER,
            job_type="synthetic",
            input=struct_from_dict({"sleep_ms": 0}),
            depends_on=depends_on,
        )
    )
    return answer.job.id, time.perf_counter() - started


async def complete(executor: executor_service_pb2_grpc.ExecutorServiceStub, job_id: str) -> float:
    """Locks the job (not timed) and times its SubmitResult."""
    locked = (await executor.LockJob(epb.LockJobRequest(job_id=job_id, worker_id="bench"))).job
    assert locked.job_id == job_id, f"{job_id} was not granted"
    request = epb.SubmitResultRequest(
        job_id=job_id,
        lease_token=locked.lease_token,
        output=struct_from_dict(OUTPUT),
        output_hash=output_hash(OUTPUT),
    )
    started = time.perf_counter()
    await executor.SubmitResult(request)
    return time.perf_counter() - started


async def uncounted(db: asyncpg.Connection, joins: list[str], expected: int) -> bool:
    """The joins wait for ``expected`` dependencies in all, as the resolver counted them."""
    left = await db.fetchval(
        "SELECT sum(dependencies_uncounted) FROM jobs WHERE id = ANY($1::text[]::uuid[])", joins
    )
    return bool(left == expected)


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "median_ms": round(statistics.median(ms), 2),
        "p90_ms": round(ms[int(len(ms) * 0.9)], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


async def main(args: argparse.Namespace) -> None:
    # one user holds every job of the run: no per-user limit on unfinished jobs
    os.environ["JOBS_MAX_ACTIVE_JOBS_PER_USER"] = "0"
    os.environ["JOBS_DAILY_JOB_QUOTA_PER_USER"] = "0"
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-fan-in-"))
    stack = Stack(root)
    try:
        await stack.start()
        db = await asyncpg.connect(stack.database_url)
        worker = aio_channel(ChannelConfig(target=f"127.0.0.1:{stack.port}", token=WORKER_TOKEN))
        async with channel(stack.port) as client_channel, worker:
            stub = job_service_pb2_grpc.JobServiceStub(client_channel)
            executor = executor_service_pb2_grpc.ExecutorServiceStub(worker)
            k = args.completions
            alone = await create_many(stub, k)
            narrow = await create_many(stub, k)
            narrow_joins = [(await join(stub, narrow[i : i + 10]))[0] for i in range(0, k, 10)]
            wide = await create_many(stub, args.wide)
            wide_join, attach_s = await join(stub, wide)
            times: dict[str, list[float]] = {"alone": [], "narrow": [], "wide": []}
            for n in range(k):  # interleaved: drift hits each shape alike
                times["alone"].append(await complete(executor, alone[n]))
                times["narrow"].append(await complete(executor, narrow[n]))
                times["wide"].append(await complete(executor, wide[n]))
            # the resolver counts within a round or two
            await wait_for(lambda: uncounted(db, [wide_join], args.wide - k), 10, "the count")
            await wait_for(lambda: uncounted(db, narrow_joins, 0), 10, "the narrow counts")
        results = {name: summary(seconds) for name, seconds in times.items()}
        report = {
            "completions_each": k,
            "wide_join_width": args.wide,
            "create_wide_join_s": round(attach_s, 3),
            **results,
            "wide_over_alone_median": round(
                results["wide"]["median_ms"] / results["alone"]["median_ms"], 2
            ),
            "wide_over_narrow_median": round(
                results["wide"]["median_ms"] / results["narrow"]["median_ms"], 2
            ),
            "narrow_over_alone_median": round(
                results["narrow"]["median_ms"] / results["alone"]["median_ms"], 2
            ),
        }
        print(json.dumps(report, indent=2))
    except Exception:
        for log in (root / "job_service-0.log", root / "pg" / "postgresql.log"):
            if log.exists():  # what the service and the database said, for the report
                print(log.read_text()[-6000:])
        raise
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wide", type=int, default=10_000, help="the wide join's width")
    parser.add_argument("--completions", type=int, default=200, help="timed per shape")
    uvloop.run(main(parser.parse_args()))
