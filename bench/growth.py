"""What create, get, lock and submit cost as the tables grow: empty against loaded.

    make bench-growth                                   # python -m bench.growth
    python -m bench.growth --finished 100000 --waiting 10000 --samples 100   # a smoke run

It starts the stack as ``make bench`` does (durable PostgreSQL, NATS, job_service; no
worker: this process plays the worker) twice, side by side: one stays empty, the other is
loaded with FINISHED succeeded jobs (each with a snapshot, two timeline events, an artifact
and a usage row) and WAITING queued jobs in the same queue, ahead in line (INSERT ... SELECT
generate_series), then both get VACUUM (ANALYZE) and a CHECKPOINT (as autovacuum and the
checkpointer would have). Then it times SAMPLES rounds of CreateJob, GetJob, LockJob and
SubmitResult (a synthetic job with one artifact, as a worker submits it), one call at a
time, alternating between the two (a drift of a shared machine's speed moves both sides
alike). The figure is p50 loaded / p50 empty per call (target: at most 1.2).

Last, it logs every statement of one more round (``log_min_duration_statement = 0`` for
a moment; the service's background loops' statements of that moment come along), and
prints each headed by the time its own execution took, then its EXPLAIN (ANALYZE, BUFFERS)
run again on the loaded tables with the logged parameters, rolled back. That second run
comes after the round's own, so a compare-and-set finds its row already moved (rows=0);
the access paths are the ones the round used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import uvloop

from bench.e2e import NOOP, WORKER_TOKEN, Stack, channel
from shared.grpc_client import ChannelConfig, aio_channel
from shared.output_hash import output_hash
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import executor_service_pb2_grpc, job_pb2, job_service_pb2_grpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict

OPS = ("create", "get", "lock", "submit")
USERS = 50
OUTPUT = {"attempt": 1, "data": "x"}

# The history: succeeded jobs of many users, finished over the last 30 days.
LOAD_FINISHED = """
INSERT INTO jobs (user_id, job_type, queue, request_hash, status, max_attempts, timeout_ms,
                  input_schema_version, output_schema_version, definition_version,
                  validated_output, output_hash, attempt_count, created_at, queued_at,
                  started_at, finished_at, updated_at)
SELECT 'growth-old-' || (g % 5000), 'synthetic', 'ai-interactive', md5(g::text), 'succeeded',
       3, 60000, '1', '1', '1.0.0', '{"attempt": 1, "data": "x"}', md5(g::text), 1,
       t, t, t, t + interval '10 milliseconds', t + interval '10 milliseconds'
FROM generate_series(1, $1) g,
     LATERAL (SELECT now() - interval '30 days' + g * (interval '30 days' / $1)) s(t)
"""
# The line: queued jobs of many users, due and ahead of every job the rounds create.
LOAD_WAITING = """
INSERT INTO jobs (user_id, job_type, queue, request_hash, status, max_attempts, timeout_ms,
                  input_schema_version, output_schema_version, definition_version,
                  fairness_key, created_at, queued_at, updated_at, sched_key)
SELECT 'growth-waiting-' || (g % 1000), 'synthetic', 'ai-interactive', md5(g::text), 'queued',
       3, 60000, '1', '1', '1.0.0', 'growth-waiting-' || (g % 1000), t, t, t,
       extract(epoch FROM t) - 3600
FROM generate_series(1, $1) g,
     LATERAL (SELECT now() - interval '1 hour' + g * (interval '1 hour' / $1)) s(t)
"""
LOAD_REST = [
    "INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version)"
    " SELECT id, '{}', request_hash, '1' FROM jobs"
    " WHERE user_id LIKE 'growth-old-%' OR user_id LIKE 'growth-waiting-%'",
    "INSERT INTO job_events (job_id, from_status, to_status, attempt, created_at)"
    " SELECT id, s.f, s.t, 1, finished_at FROM jobs,"
    " (VALUES ('queued', 'running'), ('running', 'succeeded')) s(f, t)"
    " WHERE user_id LIKE 'growth-old-%'",
    "INSERT INTO job_events (job_id, from_status, to_status, attempt, created_at)"
    " SELECT id, NULL, 'queued', 0, created_at FROM jobs WHERE user_id LIKE 'growth-waiting-%'",
    "INSERT INTO job_artifacts (job_id, artifact_type, artifact_id, payload)"
    " SELECT id, 'synthetic_result', 'syn_' || id, '{\"n\": 1}' FROM jobs"
    " WHERE user_id LIKE 'growth-old-%'",
    "INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode,"
    " input_tokens, output_tokens, cost_usd, created_at)"
    " SELECT id, 1, 'fake', 'fake-primary', 'platform', 10, 5, 0.001, finished_at FROM jobs"
    " WHERE user_id LIKE 'growth-old-%'",
    # As autovacuum and the checkpointer would have by then, and so that neither runs
    # during the timed rounds: visibility map set (index-only scans), statistics, dirty
    # pages written. The empty database gets the same before its rounds.
    "VACUUM (ANALYZE)",
    "CHECKPOINT",
]
SETTLE = ["VACUUM (ANALYZE)", "CHECKPOINT"]


class Rounds:
    """CreateJob, GetJob, LockJob and SubmitResult, one call at a time, timed."""

    def __init__(self, jobs: job_service_pb2_grpc.JobServiceStub, executor: object) -> None:
        self.jobs = jobs
        self.executor = executor_service_pb2_grpc.ExecutorServiceStub(executor)  # type: ignore[arg-type]
        self.n = 0

    async def one(self) -> dict[str, float]:
        self.n += 1
        user = f"growth-new-{self.n % USERS}"
        took: dict[str, float] = {}
        started = time.perf_counter()
        created = await self.jobs.CreateJob(
            jpb.CreateJobRequest(user_id=user, job_type="synthetic", input=NOOP)
        )
        took["create"] = time.perf_counter() - started
        started = time.perf_counter()
        await self.jobs.GetJob(jpb.GetJobRequest(job_id=created.job.id, user_id=user))
        took["get"] = time.perf_counter() - started
        # The claim grants the queue's first job in line (a work token, not this id): on the
        # loaded database one of the waiting jobs ahead of it.
        started = time.perf_counter()
        lock = await self.executor.LockJob(
            epb.LockJobRequest(job_id=created.job.id, worker_id="growth-worker")
        )
        took["lock"] = time.perf_counter() - started
        if lock.outcome != epb.LOCK_OUTCOME_LOCKED:
            raise RuntimeError(f"LockJob answered {epb.LockOutcome.Name(lock.outcome)}")
        job_id, token = lock.job.job_id, lock.job.lease_token
        started = time.perf_counter()
        await self.executor.SubmitResult(
            epb.SubmitResultRequest(
                job_id=job_id,
                lease_token=token,
                output=struct_from_dict(OUTPUT),
                output_hash=output_hash(OUTPUT),
                artifacts=[
                    job_pb2.Artifact(
                        artifact_type="synthetic_result",
                        artifact_id=f"syn_{job_id}",
                        payload=struct_from_dict({"n": 1}),
                    )
                ],
            )
        )
        took["submit"] = time.perf_counter() - started
        return took


async def p50s(empty: Rounds, loaded: Rounds, samples: int) -> tuple[dict[str, float], ...]:
    """The p50 of each call on each database, from rounds that alternate between them
    (the order swapped every round): a drift of the shared machine's speed then moves both
    sides alike instead of the ratio."""
    for _ in range(20):  # warm the connections and the plan caches
        await empty.one()
        await loaded.one()
    times: tuple[dict[str, list[float]], ...] = ({op: [] for op in OPS}, {op: [] for op in OPS})
    for n in range(samples):
        for side in (0, 1) if n % 2 == 0 else (1, 0):
            for op, seconds in (await (empty, loaded)[side].one()).items():
                times[side][op].append(seconds * 1000)
    return tuple({op: statistics.median(v) for op, v in side.items()} for side in times)


@contextlib.asynccontextmanager
async def connected(stack: Stack) -> AsyncIterator[tuple[asyncpg.Connection, Rounds]]:
    """A database connection to ``stack`` and its rounds (as a client and a worker)."""
    db = await asyncpg.connect(stack.database_url)
    worker_channel = aio_channel(
        ChannelConfig(target=f"127.0.0.1:{stack.port}", token=WORKER_TOKEN)
    )
    try:
        async with channel(stack.port) as client_channel, worker_channel:
            yield db, Rounds(job_service_pb2_grpc.JobServiceStub(client_channel), worker_channel)
    finally:
        await db.close()


# A logged statement: "duration: 0.1 ms  execute <name>: <text>" (text may span lines),
# then maybe "DETAIL:  Parameters: $1 = '...', $2 = NULL".
EXECUTE = re.compile(r"duration: ([\d.]+) ms  execute [^:]*: (.*)")
PARAM = re.compile(r"\$(\d+) = ('(?:[^']|'')*'|NULL)")
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d ")


def logged_statements(log: str) -> list[tuple[str, list[str], float]]:
    """(text, parameter literals, ms it took) of each executed statement in a PostgreSQL
    log."""
    found: list[tuple[str, list[str], float]] = []
    lines = log.splitlines()
    i = 0
    while i < len(lines):
        match = EXECUTE.search(lines[i])
        i += 1
        if not match:
            continue
        took = float(match.group(1))
        text = [match.group(2)]
        while i < len(lines) and not LOG_LINE.match(lines[i]):
            text.append(lines[i])
            i += 1
        params: list[str] = []
        if i < len(lines) and "detail:  parameters:" in lines[i].lower():
            detail = lines[i]
            i += 1
            while i < len(lines) and not LOG_LINE.match(lines[i]):
                detail += "\n" + lines[i]
                i += 1
            params = [value for _, value in sorted(PARAM.findall(detail), key=lambda p: int(p[0]))]
        found.append(("\n".join(text), params, took))
    return found


async def explain(db: asyncpg.Connection, text: str, params: list[str]) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of a logged statement with its logged parameters,
    rolled back."""
    tx = db.transaction()
    await tx.start()
    try:
        await db.execute(f"PREPARE growth_stmt AS {text}")
        args = f"({', '.join(params)})" if params else ""
        rows = await db.fetch(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE growth_stmt{args}")
        return "\n".join(r[0] for r in rows)
    except asyncpg.PostgresError as exc:
        return f"(not explained: {type(exc).__name__}: {exc})"
    finally:
        await tx.rollback()
        # only ours: asyncpg keeps its own prepared statements on this connection
        mine = "SELECT count(*) FROM pg_prepared_statements WHERE name = 'growth_stmt'"
        if await db.fetchval(mine):
            await db.execute("DEALLOCATE growth_stmt")


async def hot_plans(stack: Stack, db: asyncpg.Connection, rounds: Rounds) -> str:
    log_path = stack.pg.data_dir.parent / "growth-statements.log"
    before = _pg_log(stack).stat().st_size
    await db.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
    await db.execute("SELECT pg_reload_conf()")
    # The postmaster passes the reload on to the service's connections asynchronously, and
    # no query tells when they all have it: give them a moment (a bench, not a test).
    await asyncio.sleep(1)
    try:
        await rounds.one()
    finally:
        await db.execute("ALTER SYSTEM RESET log_min_duration_statement")
        await db.execute("SELECT pg_reload_conf()")
    with _pg_log(stack).open() as log:
        log.seek(before)
        captured = log.read()
    log_path.write_text(captured)
    seen: set[str] = set()
    out: list[str] = []
    for text, params, took in logged_statements(captured):
        key = " ".join(text.split())
        if key in seen or key.startswith(("ALTER SYSTEM", "SELECT pg_reload_conf")):
            continue
        seen.add(key)
        # the time the service's own execution took (the plan below is a second run)
        out.append(f"--- [{took:.2f} ms] {key[:150]}{'…' if len(key) > 150 else ''}")
        out.append(await explain(db, text, params))
    return "\n".join(out)


def _pg_log(stack: Stack) -> Path:
    return stack.pg._log_path  # the server log pg_ctl writes (devstack.embedded)


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-growth-"))
    if args.reconcile_after_s:
        # The loaded waiting jobs have no dispatch rows: by default the reconciler re-sends
        # 500 of them every 5 s during the rounds (what a backlog older than 30 s costs).
        os.environ["JOBS_RECONCILE_AFTER_S"] = str(args.reconcile_after_s)
    # Two stacks side by side, one left empty and one loaded, their rounds alternating.
    stacks = [Stack(root / "empty"), Stack(root / "loaded")]
    try:
        for stack in stacks:
            (root / stack.root.name).mkdir()
            await stack.start()
        async with connected(stacks[0]) as (empty_db, empty), connected(stacks[1]) as (db, rounds):
            print(
                f"loading {args.finished:,} finished and {args.waiting:,} waiting jobs", flush=True
            )
            started = time.perf_counter()
            await db.execute(LOAD_FINISHED, args.finished)
            await db.execute(LOAD_WAITING, args.waiting)
            for statement in LOAD_REST:
                await db.execute(statement)
            loaded_in = time.perf_counter() - started
            for statement in SETTLE:
                await empty_db.execute(statement)
            p50_empty, p50_loaded = await p50s(empty, rounds, args.samples)
            plans = await hot_plans(stacks[1], db, rounds) if args.explain else ""
    except BaseException:
        for stack in stacks:
            stack.stop()
        print(f"failed; the processes' logs are in {root}", file=sys.stderr)
        raise
    for stack in stacks:
        stack.stop()
    shutil.rmtree(root, ignore_errors=True)

    print(f"\nCost as the tables grow: p50 of {args.samples} calls each, one at a time,")
    print(f"empty vs {args.finished:,} finished + {args.waiting:,} waiting jobs", end=" ")
    print(f"(loaded in {loaded_in:.0f} s; the two databases' rounds alternate)")
    print(f"{'call':<10}{'empty ms':>10}{'loaded ms':>11}{'loaded/empty':>14}")
    for op in OPS:
        ratio = p50_loaded[op] / p50_empty[op]
        print(f"{op:<10}{p50_empty[op]:>10.2f}{p50_loaded[op]:>11.2f}{ratio:>14.2f}")
    if plans:
        print("\nEXPLAIN (ANALYZE, BUFFERS) of each statement of one round, loaded:\n")
        print(plans)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--waiting", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=300, help="rounds per measurement")
    parser.add_argument(
        "--reconcile-after-s",
        type=float,
        help="the service's JOBS_RECONCILE_AFTER_S (e.g. 3600: no re-dispatch of the backlog)",
    )
    parser.add_argument("--no-explain", dest="explain", action="store_false", help="skip the plans")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
