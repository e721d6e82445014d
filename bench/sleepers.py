"""Durable sleepers at scale (issue 45): many jobs asleep at once hold no worker slot, no
lease and no NATS message, and wake on time.

    python -m bench.sleepers                       # 10,000 sleepers, wakes spread over 30 s
    python -m bench.sleepers --jobs 2000 --spread 10

It starts the stack as ``bench.e2e`` does (a private PostgreSQL, NATS JetStream, job_service
and one worker process running ``bench/sleep_jobtypes.py``), creates ``--jobs`` sleepers
with CreateJobs for ``--users`` owners, each to sleep until its own time (``--lead``
seconds after the start, plus a uniform share of ``--spread``), waits until every one is
asleep, and counts what they hold then: leases, running jobs, messages in the dispatch
stream. Then it waits until all have finished and reports how late each woke (its code's
wall clock at the wake minus the time it slept until: one machine, one clock), and how
many ran before their time (a job that ran early would have slept again: a second
suspension in its timeline).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg
import nats
import uvloop

from bench.e2e import Stack, channel, wait_for
from shared.constants import DISPATCH_STREAM
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import struct_from_dict

MODULES = "bench.sleep_jobtypes"
USERS = "bench-sleepers-%"
BATCH = 500


class SleepStack(Stack):
    def _env(self) -> dict[str, str]:
        return {
            **super()._env(),
            "JOBS_JOB_TYPE_MODULES": MODULES,
            "JOBS_MAX_ACTIVE_JOBS_PER_USER": "0",
            "JOBS_DAILY_JOB_QUOTA_PER_USER": "0",
        }


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-sleepers-"))
    stack = SleepStack(root)
    try:
        await stack.start()
        stack.start_worker()
        db = await asyncpg.connect(stack.database_url)
        async with channel(stack.port) as client_channel:
            stub = job_service_pb2_grpc.JobServiceStub(client_channel)
            await wait_for(lambda: declared(db), 60, "the worker to declare sleeper")
            start = time.time()
            rng = random.Random(45)
            wake = [start + args.lead + rng.uniform(0, args.spread) for _ in range(args.jobs)]
            await create(stub, wake, args.users)
            created_s = time.time() - start
            await wait_for(lambda: all_asleep(db, args.jobs), args.lead, "every job to fall asleep")
            asleep_s = time.time() - start
            held = await holding(db, stack.nats.url)
            first_wake = min(wake)
            await wait_for(
                lambda: all_done(db, args.jobs), args.lead + args.spread + 300, "the wakes"
            )
        rows = await db.fetch(
            "SELECT j.id, (j.validated_output->>'woke')::float8 AS woke,"
            " (s.payload->>'wake_at')::float8 AS wake_at,"
            " (SELECT count(*) FROM job_events e WHERE e.job_id = j.id"
            "  AND e.reason = 'SUSPENDED_SLEEP') AS suspensions"
            " FROM jobs j JOIN job_snapshots s ON s.job_id = j.id WHERE j.user_id LIKE $1",
            USERS,
        )
        await db.close()
    finally:
        stack.stop()
        if args.keep:
            print(f"logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    late = sorted(r["woke"] - r["wake_at"] for r in rows)
    early = sum(1 for r in rows if r["suspensions"] != 1)
    print(f"sleepers: {len(rows)} jobs of {args.users} users, wakes spread over {args.spread:g} s")
    print(
        f"  created in {created_s:.1f} s; all asleep {asleep_s:.1f} s after the start, "
        f"{first_wake - start - asleep_s:.1f} s before the first wake"
    )
    print(
        f"  while asleep: {held['leases']} leases, {held['running']} running, "
        f"{held['stream']} messages in {DISPATCH_STREAM}, {held['tokens']} work tokens "
        "waiting in the outbox"
    )
    print(
        f"  woke late by: p50 {pct(late, 50):.3f} s, p99 {pct(late, 99):.3f} s, "
        f"max {late[-1]:.3f} s, min {late[0]:.3f} s"
    )
    print(f"  ran before their time (a second suspension): {early}")


async def declared(db: asyncpg.Connection) -> bool:
    """The worker declared ``sleeper`` (to the one replica, which holds it from then on)."""
    return bool(await db.fetchval("SELECT count(*) FROM job_type_specs WHERE job_type = 'sleeper'"))


async def create(stub: job_service_pb2_grpc.JobServiceStub, wake: list[float], users: int) -> None:
    for start in range(0, len(wake), BATCH):
        response = await stub.CreateJobs(
            jpb.CreateJobsRequest(
                requests=[
                    jpb.CreateJobRequest(
                        user_id=f"bench-sleepers-{n % users}",
                        job_type="sleeper",
                        input=struct_from_dict({"wake_at": wake[n]}),
                    )
                    for n in range(start, min(len(wake), start + BATCH))
                ]
            )
        )
        refused = [r.error.message for r in response.results if r.HasField("error")]
        if refused:
            raise RuntimeError(f"CreateJobs refused {len(refused)}: {refused[0]}")


async def all_asleep(db: asyncpg.Connection, n: int) -> bool:
    asleep = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE user_id LIKE $1 AND status = 'retrying'"
        " AND error_code = 'SUSPENDED_SLEEP'",
        USERS,
    )
    return bool(asleep == n)


async def all_done(db: asyncpg.Connection, n: int) -> bool:
    done = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE user_id LIKE $1 AND status = 'succeeded'", USERS
    )
    return bool(done == n)


async def holding(db: asyncpg.Connection, nats_url: str) -> dict[str, int]:
    row = await db.fetchrow(
        "SELECT count(*) FILTER (WHERE lock_until IS NOT NULL) AS leases,"
        " count(*) FILTER (WHERE status = 'running') AS running FROM jobs WHERE user_id LIKE $1",
        USERS,
    )
    tokens = await db.fetchval(
        "SELECT count(*) FROM outbox_events WHERE status = 'pending' AND available_at > now()"
    )
    connection = await nats.connect(nats_url)
    try:
        info = await connection.jetstream().stream_info(DISPATCH_STREAM)
    finally:
        await connection.close()
    return {
        "leases": row["leases"],
        "running": row["running"],
        "stream": info.state.messages,
        "tokens": tokens,
    }


def pct(values: list[float], p: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]
        if len(values) > 1
        else values[0]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.sleepers")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--lead", type=float, default=90.0, help="seconds before the first wake")
    parser.add_argument("--spread", type=float, default=30.0, help="seconds the wakes spread over")
    parser.add_argument(
        "--users",
        type=int,
        default=100,
        help="owners (fairness keys) the sleepers are spread over",
    )
    parser.add_argument("--keep", action="store_true", help="keep the stack's logs afterwards")
    uvloop.run(main(parser.parse_args()))
