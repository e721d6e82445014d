"""A replica that stops talking inside a transaction (SIGSTOP, a long pause, a network cut
with the connection still up) holds its row locks for seconds only: PostgreSQL ends its
session after ``JOBS_DB_IDLE_IN_TRANSACTION_TIMEOUT_S`` (the session guards every
connection of the job service starts with), and the other replica's claim, cancel and
schedule firing go on.

The frozen replica is a connection opened as job_service opens its own (``create_pool``
with ``session_guards``): it locks rows in a transaction and then sends nothing, which is
all PostgreSQL sees of a stopped process. Real PostgreSQL; the other replica in process.
A NATS connection cut off (a proxy that stops forwarding, closing nothing) is given up
after its unanswered pings (``JOBS_NATS_PING_INTERVAL_S``, ``_MAX_OUTSTANDING_PINGS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from job_service.adapters.postgres.pool import create_pool
from job_service.app import JobServiceApp
from job_service.databases import session_guards
from job_service.settings import JobServiceSettings
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import struct_from_dict
from shared.startup import connect_nats
from tests.support.blackhole_proxy import BlackHoleProxy, tcp_port
from tests.support.stack import Client, open_channel
from tests.support.wait import eventually

# the product's defaults (JOBS_* of the environment included)
DEFAULTS = JobServiceSettings(database_url="postgresql://unused")
# Longer than any bound below: without the guards the locks outlive every wait.
FROZEN_FOR_S = 10.0
# The locks are gone at the idle timeout; 2 s for the waiter to get through on a loaded
# machine (the firing loop sleeps up to 1 s between rounds).
BOUND_S = DEFAULTS.db_idle_in_transaction_timeout_s + 2.0


@asynccontextmanager
async def frozen_replica(database_url: str, lock: str, *args: Any) -> AsyncIterator[Any]:
    """A job_service connection that runs ``lock`` in a transaction, then falls silent."""
    pool = await create_pool(database_url, 1, guards=session_guards(DEFAULTS))
    try:
        conn = await pool.acquire()
        await conn.execute("BEGIN")
        await conn.execute(lock, *args)
        yield conn
    finally:
        pool.terminate()


@pytest.mark.slow
async def test_a_frozen_replicas_row_locks_end_within_the_idle_timeout_for_claims_and_cancels(
    job_service: JobServiceApp, client: Client, database_url: str
) -> None:
    to_claim = (await client.create(key="claimed")).job
    to_cancel = (await client.create(key="cancelled")).job
    lock = "SELECT id FROM jobs WHERE id = ANY($1::uuid[]) FOR UPDATE"

    async with frozen_replica(database_url, lock, [to_claim.id, to_cancel.id]) as frozen:
        started = time.monotonic()
        cancelled = await client.jobs.CancelJob(
            jpb.CancelJobRequest(job_id=to_cancel.id, user_id="user-1"), timeout=FROZEN_FOR_S
        )
        cancel_took = time.monotonic() - started
        granted = await eventually(
            lambda: _lock_job(client, to_claim.id), timeout=FROZEN_FOR_S, interval=0.1
        )
        claim_took = time.monotonic() - started

        assert cancelled.job.status == job_pb2.JOB_STATUS_CANCELLED
        assert granted.job.job_id == to_claim.id
        assert cancel_took <= BOUND_S, f"the cancel waited {cancel_took:.1f}s"
        assert claim_took <= BOUND_S, f"the claim waited {claim_took:.1f}s"
        # the server ended the frozen session: what it held was rolled back
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError)):
            await frozen.execute("SELECT 1")


@pytest.mark.slow
async def test_a_schedule_a_frozen_replica_holds_fires_again_within_the_idle_timeout(
    job_service: JobServiceApp, database_url: str, db: asyncpg.Connection
) -> None:
    async with open_channel(f"127.0.0.1:{job_service.port}") as channel:
        made = await Client(channel).schedules.CreateSchedule(
            spb.CreateScheduleRequest(
                user_id="alice",
                spec=spb.ScheduleSpec(
                    cron="* * * * * *",
                    job_template=spb.JobTemplate(
                        job_type="synthetic", input=struct_from_dict({"sleep_ms": 1})
                    ),
                    overlap_policy=spb.OVERLAP_POLICY_ALLOW,
                ),
            )
        )
    schedule_id = made.schedule.id
    await eventually(lambda: _fired_since(db, schedule_id, 0.0), timeout=FROZEN_FOR_S)
    lock = "SELECT id FROM schedules WHERE id = $1 FOR UPDATE"  # as a firing round does

    async with frozen_replica(database_url, lock, schedule_id):
        frozen_at = float(await db.fetchval("SELECT extract(epoch FROM clock_timestamp())"))
        await eventually(
            lambda: _fired_since(db, schedule_id, frozen_at), timeout=FROZEN_FOR_S, interval=0.1
        )
        lag = await db.fetchval(
            "SELECT extract(epoch FROM max(recorded_at - slot)) FROM schedule_runs"
            " WHERE schedule_id = $1 AND slot >= to_timestamp($2)",
            schedule_id,
            frozen_at,
        )

    assert float(lag) <= BOUND_S, f"a slot fired {float(lag):.1f}s late"


async def _lock_job(client: Client, job_id: str) -> epb.LockJobResponse | None:
    answer = await client.executor.LockJob(
        epb.LockJobRequest(job_id=job_id, worker_id="w-live"), timeout=FROZEN_FOR_S
    )
    return answer if answer.outcome == epb.LOCK_OUTCOME_LOCKED else None


async def _fired_since(db: asyncpg.Connection, schedule_id: str, since: float) -> bool:
    return bool(
        await db.fetchval(
            "SELECT count(*) > 0 FROM schedule_runs WHERE schedule_id = $1"
            " AND slot >= to_timestamp($2) AND outcome = 'fired'",
            schedule_id,
            since,
        )
    )


# A silent NATS server must be noticed within PINGS x PING_S (plus one interval for the
# first ping to go out); the client's defaults (2 minutes x 2) would take four minutes.
PING_S = 0.5
PINGS = 2


async def test_a_nats_server_cut_off_is_left_within_its_pings(nats_url: str) -> None:
    address = urlsplit(nats_url)
    assert address.hostname is not None and address.port is not None
    proxy = BlackHoleProxy(tcp_port(address.hostname, address.port))
    await proxy.start()
    disconnected = asyncio.Event()

    async def on_disconnect() -> None:
        disconnected.set()

    nc = await connect_nats(
        proxy.nats_url,
        "cut-off test",
        ping_interval_s=PING_S,
        max_outstanding_pings=PINGS,
        disconnected_cb=on_disconnect,
    )
    try:
        await nc.flush()
        proxy.cut()  # the connection stays up; nothing gets through either way
        started = time.monotonic()
        await asyncio.wait_for(disconnected.wait(), timeout=FROZEN_FOR_S)
        took = time.monotonic() - started

        assert took <= PING_S * (PINGS + 1) + 2.0, f"noticed after {took:.1f}s"
    finally:
        proxy.heal()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), timeout=5)
        await proxy.stop()
