"""A PostgreSQL primary and a streaming standby from the pgserver wheel's binaries, with
synchronous replication, for the chaos ``failover`` profile; and the fault that kills the
primary and promotes the standby.

The primary is the harness's usual ``EmbeddedPostgres`` with replication settings; the
standby is ``pg_basebackup -R`` of it (run as the server's system user, as initdb is),
started as a hot standby. The primary names any standby synchronous
(``synchronous_standby_names = '*'``, ``synchronous_commit = on``): a commit is
acknowledged only once the standby has flushed its WAL, so nothing a client was told is
lost when the primary dies. Every process connects with a multi-host URL
(``host=<primary socket>,<standby socket>&target_session_attrs=read-write``): it finds
whichever server accepts writes.

fsync stays off as in the other profiles: the fault is a process crash (SIGKILL), not a
machine crash, so written WAL survives in the page cache; what synchronous replication is
tested for is a commit reaching the *other* server before it is acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from urllib.parse import quote

import asyncpg

from devstack.embedded import EmbeddedPostgres
from devstack.embedded.postgres import PG_SUPERUSER
from tests.chaos.faults import FaultContext, FaultRecord, _probe

REPLICATION = {
    "wal_level": "replica",
    "max_wal_senders": "5",
    "hot_standby": "on",
    "wal_keep_size": "256MB",
}
# Set on the primary once its standby streams (ALTER SYSTEM: a -c option could not be
# changed and would make every commit before the standby exists wait forever). The standby
# copied the configuration before that: promoted, it runs alone, waiting for no one.
SYNCHRONOUS = (
    "ALTER SYSTEM SET synchronous_standby_names = '*'",
    "ALTER SYSTEM SET synchronous_commit = 'on'",
    "SELECT pg_reload_conf()",
)
SYNC_WAIT_S = 30.0
WRITE_PROBE_TIMEOUT_S = 60.0
# How long the failover manager (Patroni, a cloud's managed failover, an operator) takes to
# notice the primary is gone before it promotes: the services meanwhile find no server that
# accepts writes and answer PLATFORM_UNAVAILABLE. Real managers take 10-30 s; 2 s here.
DETECTION_S = 2.0
PROMOTE_WAIT_S = 60


def multi_host_url(servers: list[EmbeddedPostgres], database: str) -> str:
    hosts = ",".join(quote(str(s.socket_dir), safe="/") for s in servers)
    return (
        f"postgresql://{PG_SUPERUSER}@/{quote(database, safe='')}"
        f"?host={hosts}&target_session_attrs=read-write"
    )


class PgPair:
    """The primary (started by the harness like its single server) and its standby."""

    def __init__(self, root: Path, settings: dict[str, str]) -> None:
        self.primary = EmbeddedPostgres(root / "pg", settings={**settings, **REPLICATION})
        self.standby = EmbeddedPostgres(root / "pg-standby", settings={**settings, **REPLICATION})
        self.promoted = False

    def start_standby(self) -> None:
        """pg_basebackup of the running primary (``-R``: standby.signal and the primary's
        connection info), then start it as a hot standby."""
        standby = self.standby
        run_as = standby._prepare_filesystem()
        standby._run(
            "pg_basebackup",
            f"--host={self.primary.socket_dir}",
            f"--username={PG_SUPERUSER}",
            "--wal-method=stream",
            "--write-recovery-conf",
            "--checkpoint=fast",
            run_as=run_as,
        )
        # the primary's socket lock and log live in its data directory and were copied
        for name in ("postmaster.pid", ".s.PGSQL.5432.lock", "postgresql.log"):
            (standby.data_dir / name).unlink(missing_ok=True)
        standby.start()

    async def make_synchronous(self) -> None:
        """Name the standby synchronous on the primary and wait until it is."""
        conn = await asyncpg.connect(self.primary.url("postgres"))
        try:
            for statement in SYNCHRONOUS:
                await conn.execute(statement)
            deadline = time.monotonic() + SYNC_WAIT_S
            while not await _is_sync(conn):
                if time.monotonic() > deadline:
                    raise RuntimeError("the standby did not become synchronous")
                await asyncio.sleep(0.1)  # poll, bounded by the deadline
        finally:
            await conn.close()

    def url(self, database: str) -> str:
        return multi_host_url([self.primary, self.standby], database)

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster (its backends exit as they notice)."""
        pid = self.primary.pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        self.primary._running = False  # it is gone: stop() must not try pg_ctl on it

    def promote_standby(self) -> None:
        standby = self.standby
        standby._run(
            "pg_ctl", "promote", "--wait", f"--timeout={PROMOTE_WAIT_S}", run_as=standby._run_as()
        )
        self.promoted = True

    def stop(self) -> None:
        self.standby.stop()
        self.primary.stop(mode="immediate")


async def _is_sync(conn: asyncpg.Connection) -> bool:
    state = await conn.fetchval(
        "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming' LIMIT 1"
    )
    return bool(state == "sync")


async def _synchronous(url: str) -> bool:
    conn = await asyncpg.connect(url)
    try:
        return await _is_sync(conn)
    finally:
        await conn.close()


async def _writable_after(url: str, started: float) -> float | None:
    """Seconds from ``started`` until a write commits through the multi-host URL."""
    deadline = started + WRITE_PROBE_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            conn = await asyncio.wait_for(asyncpg.connect(url), 2.0)
            try:
                await conn.execute(
                    "CREATE TEMP TABLE write_probe (x int); INSERT INTO write_probe VALUES (1)"
                )
                return time.monotonic() - started
            finally:
                await conn.close()
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            await asyncio.sleep(0.05)  # poll, bounded by the deadline
    return None


ACKNOWLEDGED = "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[])"


async def pg_failover(ctx: FaultContext) -> FaultRecord:
    """SIGKILL the primary, promote the standby: the write outage is measured from the kill
    to the first write committed through the multi-host URL; every job acknowledged before
    the kill must be on the promoted standby (synchronous replication); the checker then
    judges every job on it."""
    cluster = ctx.cluster
    pair = cluster.pg_pair
    assert pair is not None, "pg_failover needs the failover profile"
    url = pair.url(cluster.database_name)
    record = FaultRecord("pg_failover", "primary", await cluster.db_now())
    if not await _synchronous(url):
        record.violations.append("the standby was not a synchronous standby before the fault")
    acknowledged = [s.job_id for s in ctx.workload.submissions if s.job_id is not None]
    started = time.monotonic()
    pair.kill_primary()
    killed_at = time.monotonic()
    await asyncio.sleep(DETECTION_S)  # the failover manager noticing
    await asyncio.to_thread(pair.promote_standby)
    promoted_s = time.monotonic() - killed_at
    writable_s = await _writable_after(url, killed_at)
    if writable_s is None:
        record.violations.append(f"no write committed within {WRITE_PROBE_TIMEOUT_S}s")
    else:
        record.notes.append(
            f"write outage {writable_s:.1f}s (standby promoted {promoted_s:.1f}s after the"
            f" kill, {DETECTION_S:g}s of it the simulated detection)"
        )
    pool = await cluster.db()
    present = await pool.fetchval(ACKNOWLEDGED, acknowledged)
    record.notes.append(
        f"{present} of {len(acknowledged)} jobs acknowledged before the kill on the new primary"
    )
    if present != len(acknowledged):
        record.violations.append(
            f"{len(acknowledged) - present} acknowledged jobs missing after the failover"
        )
    await _probe(ctx, record, started)
    return record


FAILOVER_FAULTS = {"pg_failover": pg_failover}
