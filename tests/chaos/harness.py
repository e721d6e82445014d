"""A chaos run: start the stack, load it, inject faults, stop, wait for quiescence, check.

python -m tests.chaos                  # the short profile (what `make chaos` runs)
python -m tests.chaos --profile long   # thousands of jobs, many faults
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg

from job_service.domain.rate_limits import parse_rate_limits
from shared.registry import MODULES_ENV, default_registry
from tests.chaos import joins
from tests.chaos.agent_faults import AGENT_FAULTS
from tests.chaos.checker import RECOVERED_AT, TERMINAL, Report, check
from tests.chaos.cluster import Cluster
from tests.chaos.cluster_faults import CLUSTER_FAULTS
from tests.chaos.faults import FAULT_KINDS, FAULTS, FaultContext, FaultRecord
from tests.chaos.grant_faults import GRANT_FAULTS
from tests.chaos.pg_failover import FAILOVER_FAULTS
from tests.chaos.profiles import Profile, StackSettings
from tests.chaos.replica_faults import REPLICA_FAULTS
from tests.chaos.schedules import ScheduledLoad
from tests.chaos.session_faults import SESSION_FAULTS
from tests.chaos.step_faults import STEP_FAULTS
from tests.chaos.workload import ChaosClient, Workload

log = logging.getLogger(__name__)

QUIESCENCE_POLL_S = 0.5
RECOVERY_MARGIN_S = 2.0
MAX_RECOVERY_WAIT_S = 30.0


async def run(
    profile: Profile,
    seed: int,
    *,
    root: Path | None = None,
    keep: bool = False,
    settings: StackSettings | None = None,
    say: Callable[[str], None] = print,
) -> Report:
    """One run; the report says whether it passed. Logs stay in ``root`` when it failed
    or ``keep`` is set."""
    root = root or Path(tempfile.mkdtemp(prefix="jobs-chaos-"))
    rng = random.Random(seed)
    report = Report(profile.name, seed)
    started = time.monotonic()
    settings = settings or profile.stack_settings()
    cluster = Cluster(
        root,
        settings,
        replicas=profile.replicas,
        workers=profile.workers,
        nats_servers=profile.nats_servers,
        pg_standby=profile.pg_standby,
    )
    try:
        say(f"chaos: starting the stack in {root}")
        await cluster.start()
        client = ChaosClient(cluster.targets)
        workload = Workload(client, rng, profile.rate, joins.load(profile.join_every_s, seed))
        # a 1-second schedule through every fault: no slot may fire twice or be missed
        scheduled = ScheduledLoad(cluster.targets)
        try:
            await scheduled.start()
            records = await _inject(profile, FaultContext(cluster, workload, rng), say)
            workload.stop()
            await scheduled.stop()
            say("chaos: faults over; waiting for every create and cancel to be answered")
            await workload.drain()
            left = await _quiesce(await cluster.db(), profile.quiesce_timeout_s)
            say(f"chaos: checking ({left} jobs unfinished)")
            report.elapsed_s = time.monotonic() - started
            limits = parse_rate_limits(settings.rate_limits)
            registry = default_registry({MODULES_ENV: settings.job_type_modules})
            await check(
                await cluster.db(),
                workload.submissions,
                records,
                cluster.log_dir,
                report,
                limits,
                registry,
                cluster.settings.redispatch_bound_s() + cluster.settings.worker_recovery_bound_s(),
            )
            fired, breaches = await scheduled.breaches(await cluster.db())
            report.violations += breaches
            report.notes.append(
                f"schedule: {fired} slots fired (rule: each once, none missed; their jobs are"
                " counted with the derived jobs in the child jobs row)"
            )
        finally:
            workload.stop()
            await workload.abandon()
            with contextlib.suppress(Exception):
                await client.close()
    finally:
        await cluster.stop()
        if report.ok and not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            report.notes.append(f"logs and data kept in {root}")
    return report


async def _inject(
    profile: Profile, ctx: FaultContext, say: Callable[[str], None]
) -> list[FaultRecord]:
    load = asyncio.create_task(ctx.workload.run(), name="workload")
    records: list[FaultRecord] = []
    try:
        await asyncio.sleep(profile.settle_s)  # load before the first fault
        deadline = time.monotonic() + profile.duration_s
        kinds = iter(profile.schedule) if profile.schedule is not None else None
        while True:
            if kinds is not None:
                kind = next(kinds, None)
                if kind is None:
                    break
            elif time.monotonic() < deadline:
                kind = ctx.rng.choice(profile.random_kinds or FAULT_KINDS)
            else:
                break
            try:
                faults = {
                    **FAULTS,
                    **CLUSTER_FAULTS,
                    **FAILOVER_FAULTS,
                    **SESSION_FAULTS,
                    **STEP_FAULTS,
                    **REPLICA_FAULTS,
                    **GRANT_FAULTS,
                    **AGENT_FAULTS,
                }
                record = await faults[kind](ctx)
            except Exception as exc:  # a fault the stack made impossible is a finding too
                log.exception("fault %s failed", kind)
                record = FaultRecord(kind, "-", await ctx.cluster.db_now())
                record.violations.append(f"the fault itself failed: {type(exc).__name__}: {exc}")
            records.append(record)
            say(f"chaos: {kind} on {record.target}" + "".join(f"; {n}" for n in record.notes))
            # one fault at a time: the next waits until this one's jobs are back at work
            await _recovered(await ctx.cluster.db(), record)
            await asyncio.sleep(profile.settle_s)  # load between faults
    finally:
        ctx.workload.stop()
        await load
    return records


async def _recovered(pool: asyncpg.Pool, record: FaultRecord) -> None:
    """Until every job the fault affected has started again or ended (or its bound, plus a
    margin, has passed: the checker then reports it)."""
    wait = min((record.bound_s or 0.0) + RECOVERY_MARGIN_S, MAX_RECOVERY_WAIT_S)
    deadline = time.monotonic() + wait
    waiting = list(record.affected)
    while waiting and time.monotonic() < deadline:
        waiting = [
            job_id
            for job_id in waiting
            if await pool.fetchval(RECOVERED_AT, job_id, record.injected_at, list(TERMINAL)) is None
        ]
        if waiting:
            await asyncio.sleep(QUIESCENCE_POLL_S)  # poll, bounded by the deadline


async def _quiesce(pool: asyncpg.Pool, timeout_s: float) -> int:
    """Until no job is left unfinished, or the deadline (the checker then reports them);
    returns how many are left."""
    deadline = time.monotonic() + timeout_s
    while True:
        left: int = await pool.fetchval(
            "SELECT count(*) FROM jobs WHERE NOT status = ANY($1::text[])", list(TERMINAL)
        )
        if left == 0 or time.monotonic() > deadline:
            return left
        await asyncio.sleep(QUIESCENCE_POLL_S)  # poll, bounded by the deadline
