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

``--writes N`` measures instead what a job writes, on one stack (loaded as above, then
VACUUM and CHECKPOINT; autovacuum off so that only the jobs write): N rounds of create,
get, lock and submit, and per job the WAL bytes (``pg_current_wal_lsn()``, and the records
``pg_waldump`` reads in that range: with and without full-page images), the rows inserted,
updated and HOT-updated per table (``pg_stat_user_tables``), the index entries written per
index (the B-tree insert records of the WAL range, by relation), the transactions
committed and the statements executed (logged; the service's background loops of that
moment included). None of these depends on the speed of a shared host. ``--setup-sql``
runs statements before the rounds (e.g. an index dropped or put back), so that one
change can be measured alone on the same code:

    python -m bench.growth --writes 2000 --finished 100000 --waiting 0
    python -m bench.growth --writes 2000 --finished 100000 --waiting 0 \\
        --setup-sql "CREATE INDEX jobs_queue_status_created ON jobs (queue, status, created_at)"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import statistics
import subprocess
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


# Rows and index entries a job's statements write (bench --writes).
TABLES = ("jobs", "job_snapshots", "job_events", "job_artifacts", "outbox_events")
TABLE_COUNTS = f"""
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_newpage_upd
FROM pg_stat_user_tables WHERE relname IN {TABLES}
"""
COMMITS = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
# "rmgr: Btree len (rec/tot): 64/ 64, tx: 7, lsn: 0/1, prev 0/2, desc: INSERT_LEAF off: 3,
# blkref #0: rel 1663/5/16400 blk 1"
WAL_RECORD = re.compile(r"rmgr: (\w+)\s+len \(rec/tot\):\s+(\d+)/\s*(\d+),.*desc: (\w+)")
WAL_RELATION = re.compile(r"blkref #0: rel \d+/\d+/(\d+)")
INDEX_INSERTS = ("INSERT_LEAF", "INSERT_POST")  # one entry each (INSERT_UPPER: a split's)


async def wal_records(stack: Stack, start: str, end: str) -> list[tuple[str, int, int, str, int]]:
    """(rmgr, record bytes, bytes with full-page images, kind, relfilenode or 0) of each
    WAL record between two LSNs."""
    waldump = stack.pg._bin / "pg_waldump"
    done = await asyncio.to_thread(
        subprocess.run,
        [str(waldump), "-p", str(stack.pg.data_dir / "pg_wal"), "-s", start, "-e", end],
        capture_output=True,
        text=True,
    )
    found = []
    for line in done.stdout.splitlines():
        if m := WAL_RECORD.search(line):
            rmgr, rec, tot, kind = m.groups()
            rel = WAL_RELATION.search(line)
            found.append((rmgr, int(rec), int(tot), kind, int(rel.group(1)) if rel else 0))
    return found


async def writes(stack: Stack, db: asyncpg.Connection, rounds: Rounds, n: int) -> str:
    """What ``n`` rounds write, per job (see the module's docstring)."""
    for _ in range(20):  # warm the connections and the plan caches
        await rounds.one()
    await db.execute("CHECKPOINT")
    await asyncio.sleep(2)  # the backends' statistics of the warm-up reach the views
    tables = {r["relname"]: r for r in await db.fetch(TABLE_COUNTS)}
    commits = await db.fetchval(COMMITS)
    log_from = _pg_log(stack).stat().st_size
    await db.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
    await db.execute("SELECT pg_reload_conf()")
    await asyncio.sleep(1)  # the reload reaches the service's connections (see hot_plans)
    start = await db.fetchval("SELECT pg_current_wal_lsn()::text")
    for _ in range(n):
        await rounds.one()
    end = await db.fetchval("SELECT pg_current_wal_lsn()::text")
    wal_bytes = await db.fetchval("SELECT $1::text::pg_lsn - $2::text::pg_lsn", end, start)
    await db.execute("ALTER SYSTEM RESET log_min_duration_statement")
    await db.execute("SELECT pg_reload_conf()")
    await asyncio.sleep(2)
    after = {r["relname"]: r for r in await db.fetch(TABLE_COUNTS)}
    commits = await db.fetchval(COMMITS) - commits - 3  # this connection's own
    with _pg_log(stack).open() as log:
        log.seek(log_from)
        logged = [" ".join(text.split()) for text, _, _ in logged_statements(log.read())]
    statements = len(logged) - 2  # ALTER SYSTEM RESET and its reload
    kinds: dict[str, int] = {}
    for text in logged:
        kinds[text[:72]] = kinds.get(text[:72], 0) + 1
    names: dict[int, str] = {
        r["relfilenode"]: r["relname"]
        for r in await db.fetch("SELECT relfilenode::int, relname FROM pg_class")
    }
    records = await wal_records(stack, start, end)

    out = [f"per job, over {n:,} rounds of create, get, lock and submit:"]
    out.append(f"  WAL (pg_current_wal_lsn)  {float(wal_bytes) / n:>9,.0f} bytes")
    rec = sum(r[1] for r in records)
    tot = sum(r[2] for r in records)
    out.append(f"  WAL records               {len(records) / n:>9.1f}")
    out.append(f"  WAL without page images   {rec / n:>9,.0f} bytes")
    out.append(f"  full-page images          {(tot - rec) / n:>9,.0f} bytes")
    out.append(f"  transactions committed    {commits / n:>9.2f}")
    out.append(f"  statements executed       {statements / n:>9.2f}")
    for text, count in sorted(kinds.items(), key=lambda k: -k[1])[:12]:
        out.append(f"    {count / n:>5.2f}  {text}")
    out.append(f"  {'table':<22}{'inserted':>9}{'updated':>9}{'HOT':>6}{'new page':>9}")
    for table in TABLES:
        b, a = tables[table], after[table]
        row = [(a[k] - b[k]) / n for k in list(a.keys())[1:]]
        cells = zip(row, (9, 9, 6, 9), strict=True)
        out.append(f"  {table:<22}" + "".join(f"{v:>{w}.2f}" for v, w in cells))
    entries: dict[str, int] = {}
    for rmgr, _, _, kind, rel in records:
        if rmgr == "Btree" and kind in INDEX_INSERTS:
            name = names.get(rel, str(rel))
            entries[name] = entries.get(name, 0) + 1
    out.append(f"  index entries written     {sum(entries.values()) / n:>9.2f}")
    for name, count in sorted(entries.items(), key=lambda e: (-e[1], e[0])):
        out.append(f"    {name:<32}{count / n:>6.2f}")
    return "\n".join(out)


def _pg_log(stack: Stack) -> Path:
    return stack.pg._log_path  # the server log pg_ctl writes (devstack.embedded)


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-growth-"))
    if args.writes:
        await main_writes(args, root)
        return
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


async def main_writes(args: argparse.Namespace, root: Path) -> None:
    os.environ["JOBS_RECONCILE_AFTER_S"] = str(args.reconcile_after_s or 3600)
    stack = Stack(root / "writes")
    stack.pg.settings["autovacuum"] = "off"
    try:
        (root / "writes").mkdir()
        await stack.start()
        async with connected(stack) as (db, rounds):
            for load, count in ((LOAD_FINISHED, args.finished), (LOAD_WAITING, args.waiting)):
                if count:
                    await db.execute(load, count)
            for statement in [*LOAD_REST[:-2], *args.setup_sql, *SETTLE]:
                await db.execute(statement)
            report = await writes(stack, db, rounds, args.writes)
    except BaseException:
        stack.stop()
        print(f"failed; the processes' logs are in {root}", file=sys.stderr)
        raise
    stack.stop()
    shutil.rmtree(root, ignore_errors=True)
    print(f"{args.finished:,} finished and {args.waiting:,} waiting jobs loaded")
    for statement in args.setup_sql:
        print(f"setup: {statement}")
    print(report)


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
    parser.add_argument("--writes", type=int, metavar="N", help="measure what N jobs write")
    parser.add_argument(
        "--setup-sql",
        action="append",
        default=[],
        metavar="SQL",
        help="with --writes: a statement run after loading, before the rounds (repeatable)",
    )
    parser.add_argument("--no-explain", dest="explain", action="store_false", help="skip the plans")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
