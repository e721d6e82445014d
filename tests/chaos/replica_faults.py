"""A job_service replica that stops talking in the middle of a transaction, with its
connections still up: frozen (SIGSTOP, as a long GC pause or a stopped VM) or cut off from
PostgreSQL (a proxy that black-holes its connections, as a network partition). What it
held must be released within seconds (the session guards, JOBS_DB_*), and nothing the
other replica does may wait for it longer:

- ``released``    its sessions that were inside a transaction are ended by the server
- ``row wait``    a statement needing the rows that transaction held (what a cancel, a
                  result or a firing round locks; a claim of a rate-limited tier updates
                  the tier's row) gets them
- schedule slots  every slot of the run's 1-second schedule due during the fault fires
                  within ``slot_bound_s`` of its time (checked by the checker)

Each fault catches the replica idle inside a transaction that wrote or locked rows: it
freezes (or cuts) the replica, looks at pg_stat_activity, and lets it go again to try once
more when it was caught elsewhere, preferring a firing round (a transaction holding the
schedules table) for a while. Then the fault lasts HOLD_S. (A session caught while it
sends a result or reads the rest of a request is one PostgreSQL applies no timeout to: on
a real network the TCP keepalives end it, which a proxy reached over a Unix socket cannot
show.)
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg

from tests.chaos.faults import FaultContext, FaultRecord, _probe
from tests.chaos.grant_faults import replica_with_most_sessions

if TYPE_CHECKING:
    from tests.chaos.cluster import Replica

# How long the replica stays frozen or cut off: longer than every bound, so that a lock
# held for the whole fault is a violation.
HOLD_S = 10.0
# Tries at catching a firing round, then at catching any transaction that holds rows (a
# replica without worker sessions is in one seldom: CI's seed 1 once missed in 300 tries,
# and 11 faults measured took 21 to 212; 3,000, about 20 s at most, leave a wide margin).
# A try stops the replica for one query only: waiting there for its statements to end
# (to catch a transaction mid-statement) kept a loaded replica stopped most of the time,
# a statement waiting for a lock its own stopped sessions held, and its workers' leases ran
# out by the hundred.
FIRING_TRIES = 300
ANY_TRIES = 3000
POLL_S = 0.05

IN_TRANSACTION = """
SELECT a.pid, a.backend_xid::text AS xid,
       EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid
               AND l.relation = 'schedules'::regclass AND l.mode = 'RowShareLock') AS firing
FROM pg_stat_activity a
WHERE a.application_name = $1 AND a.backend_xid IS NOT NULL
  AND a.state = 'idle in transaction'
"""
STILL_IN = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND backend_xid::text = $2"
# the tables whose rows a replica's transactions lock or update
HELD_TABLES = ("jobs", "schedules", "rate_limits", "outbox_events", "queue_controls")


@dataclass(frozen=True)
class Caught:
    """The replica's sessions inside a transaction at the catch: (pid, xid) each."""

    sessions: list[tuple[int, str]]
    firing: bool
    tries: int


async def _catch(
    pool: asyncpg.Pool,
    replica: Replica,
    stop: Callable[[], None],
    go: Callable[[], None],
) -> Caught | None:
    """Stops the replica (``stop``) at a moment it is inside a transaction holding rows;
    None (and running again) when no try caught one."""
    for n in range(FIRING_TRIES + ANY_TRIES):
        stop()
        rows = await pool.fetch(IN_TRANSACTION, replica.application_name)
        firing = any(r["firing"] for r in rows)
        if rows and (firing or n >= FIRING_TRIES):
            return Caught([(r["pid"], r["xid"]) for r in rows], firing, n + 1)
        go()
        await asyncio.sleep(0.005)  # let it run a little before the next try
    return None


async def _released(pool: asyncpg.Pool, caught: Caught, started: float) -> float:
    """Seconds from ``started`` until none of the caught transactions is left."""
    for pid, xid in caught.sessions:
        while await pool.fetchval(STILL_IN, pid, xid):
            if time.monotonic() - started > HOLD_S:
                break
            await asyncio.sleep(POLL_S)  # poll, bounded by the fault's length
    return time.monotonic() - started


async def _row_wait(database_url: str, caught: Caught, started: float) -> tuple[float, int]:
    """Seconds from ``started`` until a statement locking every row the caught
    transactions held got them (FOR UPDATE, then rolled back: nothing changes), and how
    many rows those were."""
    conn = await asyncpg.connect(database_url)
    try:
        # the harness's own wait must end: past the fault it is a violation anyway
        await conn.execute(f"SET statement_timeout = {int((HOLD_S + 5) * 1000)}")
        held = 0
        for table in HELD_TABLES:
            for _, xid in caught.sessions:
                tids = await conn.fetch(f"SELECT ctid FROM {table} WHERE xmax::text = $1", xid)
                if not tids:
                    continue
                held += len(tids)
                async with conn.transaction():
                    await conn.fetch(
                        f"SELECT 1 FROM {table} WHERE ctid = ANY($1::tid[]) FOR UPDATE",
                        [r["ctid"] for r in tids],
                    )
        return time.monotonic() - started, held
    finally:
        await conn.close()


async def _hold(
    ctx: FaultContext,
    kind: str,
    replica: Replica,
    stop: Callable[[], None],
    go: Callable[[], None],
) -> FaultRecord:
    """Catch ``replica`` inside a transaction, keep it stopped HOLD_S while measuring what
    waits on it, let it go."""
    pool = await ctx.cluster.db()
    caught = await _catch(pool, replica, stop, go)
    record = FaultRecord(kind, replica.instance_id, await ctx.cluster.db_now())
    s = ctx.cluster.settings
    record.wait_bound_s = s.held_rows_bound_s()
    record.slot_bound_s = s.slot_bound_s()
    if caught is None:
        record.violations.append("never caught inside a transaction")
        return record
    started = time.monotonic()
    try:
        released, (waited, held) = await asyncio.gather(
            _released(pool, caught, started),
            _row_wait(ctx.cluster.database_url, caught, started),
        )
        record.waits["its transactions ended by the server"] = released
        record.waits[f"a statement got the {held} rows they held"] = waited
        record.notes.append(
            f"caught at try {caught.tries} in {len(caught.sessions)} transactions"
            + (" (a schedule firing round among them)" if caught.firing else "")
            + f" holding {held} rows; released after {released:.1f}s"
        )
        await asyncio.sleep(max(0.0, HOLD_S - (time.monotonic() - started)))  # the fault
    finally:
        go()
    record.slot_window = (record.injected_at, await ctx.cluster.db_now())
    await _probe(ctx, record, time.monotonic())  # from the replica's return
    return record


async def replica_freeze(ctx: FaultContext) -> FaultRecord:
    """SIGSTOP a replica inside a transaction for HOLD_S, then SIGCONT: the one most
    workers hold their sessions with, whose write transactions are many (one without
    sessions is rarely inside one: CI once missed it 300 times) and whose freeze its
    workers feel."""
    replica = await replica_with_most_sessions(ctx)
    process = replica.process
    assert process is not None
    return await _hold(
        ctx,
        "replica_freeze",
        replica,
        lambda: process.signal(signal.SIGSTOP),
        lambda: process.signal(signal.SIGCONT),
    )


async def replica_partition(ctx: FaultContext) -> FaultRecord:
    """Cut the proxied replica off PostgreSQL inside a transaction for HOLD_S (its
    connections stay open, no byte gets through either way), then heal the cut."""
    replica = next((r for r in ctx.cluster.replicas if r.proxy is not None), None)
    if replica is None:
        record = FaultRecord("replica_partition", "-", await ctx.cluster.db_now())
        record.notes.append("no replica behind a proxy (a PostgreSQL pair): skipped")
        return record
    proxy = replica.proxy
    assert proxy is not None
    return await _hold(ctx, "replica_partition", replica, proxy.cut, proxy.heal)


REPLICA_FAULTS: dict[str, Callable[[FaultContext], Awaitable[FaultRecord]]] = {
    "replica_freeze": replica_freeze,
    "replica_partition": replica_partition,
}
REPLICA_FAULT_KINDS = tuple(REPLICA_FAULTS)
