"""Issue 13, done when: killing job_service in the middle of ``client.create(...)`` and
retrying yields one job.

The worst moment to lose the server is after its transaction committed and before the
answer arrived: the caller saw nothing, the job exists. The test makes that moment happen
on purpose, with no sleeps: the create is held on a row lock the test owns (the user's
daily quota counter, which CreateJob's insert bumps), the client's connection (through a
proxy) starts swallowing every byte, the lock is released so that the create commits and
answers into the void, and only then is job_service killed (SIGKILL), the client's
connection reset and job_service started again. The client library's own retry, with the
idempotency key it made for the first call, must come back with that job, not make a
second one. (CreateJob is a transaction of two statements since fair-share places are
taken under a lock: a server frozen mid-create no longer commits it, so the answer is
lost on the way instead.)
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import asyncpg
import pytest
from durable_jobs_client import JobsClient, RetryPolicy

from devstack.embedded.ports import free_port
from tests.chaos.cluster import wait_serving
from tests.support.declared import declare_to
from tests.support.processes import JobServiceProcess
from tests.support.stack import ALL_ROLES_TOKEN, WORKER_TOKEN
from tests.support.tcp_proxy import TcpProxy
from tests.support.wait import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

USER = "crash-user"

# The user's quota counter for today (UTC), as CreateJob's statement keys it.
QUOTA_ROW = """
INSERT INTO job_quota_usage (user_id, day, created)
VALUES ($1, (now() AT TIME ZONE 'UTC')::date, 0)
"""
LOCK_QUOTA_ROW = """
SELECT created FROM job_quota_usage
WHERE user_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date FOR UPDATE
"""
# The backends waiting for a lock that backend $1 holds.
BLOCKED_BY = """
SELECT pid, query FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))
"""


async def _jobs_of_user(db: asyncpg.Connection) -> int:
    return int(await db.fetchval("SELECT count(*) FROM jobs WHERE user_id = $1", USER))


async def test_a_create_whose_server_dies_after_committing_is_retried_into_the_same_job(
    tmp_path: Path, database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    port = free_port()
    first = JobServiceProcess(tmp_path, "js-first", database_url, nats_url, port)
    second: JobServiceProcess | None = None
    holder = await asyncpg.connect(database_url)
    proxy = await TcpProxy(first.target).__aenter__()
    # patient enough to outlast a restart on a loaded machine; each call's own deadline
    # outlasts the hold
    jobs = JobsClient(
        proxy.target,
        user_id=USER,
        token=ALL_ROLES_TOKEN,
        timeout=60,
        retry=RetryPolicy(attempts=300, initial_backoff=0.1, max_backoff=0.5),
    )
    try:
        await wait_serving(first.target, first)
        await declare_to(first.target, WORKER_TOKEN)
        await db.execute(QUOTA_ROW, USER)
        lock = holder.transaction()
        await lock.start()
        await holder.fetchval(LOCK_QUOTA_ROW, USER)

        create = asyncio.ensure_future(asyncio.to_thread(jobs.create, "synthetic", {"sleep_ms": 1}))
        blocked = await eventually(
            lambda: holder_blocks(db, holder), timeout=30, message="the create never reached PG"
        )
        # CreateJob's statement (job_service/adapters/postgres/units.py), waiting on our lock
        assert blocked.lstrip().startswith("WITH new AS (")

        proxy.drop()  # the answer will be lost on the way
        await lock.rollback()  # ... and the create goes on and commits
        await eventually(
            lambda: _count_is(db, 1), timeout=30, message="the held create never committed"
        )
        assert not create.done()  # the caller has no answer
        first.signal(signal.SIGKILL)
        await first.wait(10)
        proxy.cut()  # the caller's connection resets; its retries wait for the new server

        second = JobServiceProcess(tmp_path, "js-second", database_url, nats_url, port)
        await wait_serving(second.target, second)
        proxy.restore()
        answer = await asyncio.wait_for(create, 120)

        row = await db.fetchrow(
            "SELECT id::text AS id, idempotency_key FROM jobs WHERE user_id = $1", USER
        )
        assert await _jobs_of_user(db) == 1
        assert row is not None and answer.job.id == row["id"]
        assert answer.created is False  # the retry found the job the lost answer was about
        assert row["idempotency_key"].startswith("client-")  # the key the client made
    finally:
        jobs.close()
        await proxy.__aexit__(None, None, None)
        await holder.close()
        first.close()
        if second is not None:
            second.close()


async def holder_blocks(db: asyncpg.Connection, holder: asyncpg.Connection) -> str | None:
    """The query of a backend waiting for ``holder``'s lock, once there is one."""
    rows = await db.fetch(BLOCKED_BY, holder.get_server_pid())
    return rows[0]["query"] if rows else None


async def _count_is(db: asyncpg.Connection, expected: int) -> bool:
    return await _jobs_of_user(db) == expected
