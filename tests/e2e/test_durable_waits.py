"""Durable sleeps and signal waits (issue 45) on a worker process whose queue has 2 slots
(``tests/support/wait_jobtypes.py``), over real PostgreSQL and NATS: jobs that sleep or
wait for a signal hold no slot and no lease while they do; sleepers wake on time, not
early and not more than 2 s late, each after one suspension; a waiter resumes within 1 s of
its signal with the payload, or returns None at its timeout."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import Registry, default_registry
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually
from tests.support.wait_jobtypes import SLOTS

MODULES = "tests.support.wait_jobtypes"
REGISTRY: Registry = default_registry({"JOBS_JOB_TYPE_MODULES": MODULES})
SpawnWorker = Callable[..., WorkerProcess]
SLEEP_S = 8.0


@pytest.fixture
async def target(database_url: str, nats_url: str) -> AsyncIterator[str]:
    async with running_job_service(database_url, nats_url, REGISTRY) as app:
        yield f"127.0.0.1:{app.port}"


async def count(db: asyncpg.Connection, sql: str, ids: list[str]) -> int:
    return int(await db.fetchval(sql, ids))


async def all_of(db: asyncpg.Connection, sql: str, ids: list[str]) -> bool:
    """Whether ``sql`` (a count over the jobs ``ids``) counts every one of them."""
    return await count(db, sql, ids) == len(ids)


async def outputs(client: Client, ids: list[str]) -> list[dict[str, float]]:
    return [dict_from_struct((await client.get(i)).output) for i in ids]


async def test_thirty_sleepers_on_two_slots_all_wake_on_time_together(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    spawn_worker("sleepy", JOBS_JOB_TYPE_MODULES=MODULES)
    began = time.time()
    ids = [(await client.create(job_type="sleeper", seconds=SLEEP_S)).job.id for _ in range(30)]

    # all asleep at once: no lease held, none running, though only 2 slots exist
    await eventually(
        lambda: all_of(
            db,
            "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'retrying'"
            " AND error_code = 'SUSPENDED_SLEEP' AND lock_until IS NULL",
            ids,
        ),
        timeout=SLEEP_S,
        message="the sleepers did not all fall asleep before the first should wake",
    )
    await eventually(
        lambda: all_of(
            db, "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'", ids
        ),
        timeout=SLEEP_S + 20,
        message="the sleepers did not all finish",
    )
    finished = time.time()

    lateness = [o["woke"] - (o["started"] + SLEEP_S) for o in await outputs(client, ids)]
    assert min(lateness) >= 0, "a sleeper went on before its time"
    assert max(lateness) <= 2.0, f"a sleeper woke {max(lateness):.2f}s late"
    # 30 sleeps of 8 s on 2 slots: about one sleep long, not 15 rounds of it
    assert finished - began < SLEEP_S + 6, f"took {finished - began:.1f}s"
    # each suspended once and woke once: never run early (it would have slept again)
    suspensions = await db.fetch(
        "SELECT job_id, count(*) AS n FROM job_events WHERE job_id = ANY($1::uuid[])"
        " AND reason = 'SUSPENDED_SLEEP' GROUP BY job_id",
        ids,
    )
    assert sorted(r["n"] for r in suspensions) == [1] * 30
    attempts = await db.fetch("SELECT attempt_count FROM jobs WHERE id = ANY($1::uuid[])", ids)
    assert {r["attempt_count"] for r in attempts} == {1}  # a sleep spends no attempt


async def test_waiters_hold_no_slot_and_resume_within_a_second_of_their_signal(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    spawn_worker("waity", JOBS_JOB_TYPE_MODULES=MODULES)
    waiters = [
        (await client.create(job_type="waiter", name="approve", timeout=120)).job.id
        for _ in range(12)
    ]
    await eventually(
        lambda: all_of(
            db,
            "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'retrying'"
            " AND error_code = 'SUSPENDED_SIGNAL' AND lock_until IS NULL",
            waiters,
        ),
        timeout=30,
        message="the waiters did not all wait",
    )

    # 12 waiters, 2 slots: jobs created after them run meanwhile
    quick = [(await client.create(job_type="quick")).job.id for _ in range(4 * SLOTS)]
    await eventually(
        lambda: all_of(
            db,
            "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'",
            quick,
        ),
        timeout=20,
        message="jobs created after the waiters did not run",
    )
    assert (
        await count(
            db,
            "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'retrying'",
            waiters,
        )
        == 12
    )

    sent_at = {}
    for n, job_id in enumerate(waiters):
        sent_at[job_id] = time.time()
        await client.jobs.SendSignal(
            jpb.SendSignalRequest(
                job_id=job_id, user_id="user-1", name="approve", payload=struct_from_dict({"n": n})
            )
        )
    await eventually(
        lambda: all_of(
            db,
            "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'",
            waiters,
        ),
        timeout=20,
        message="the waiters did not all resume",
    )
    results = await outputs(client, waiters)
    assert [r["payload"] for r in results] == [{"n": n} for n in range(12)]
    delays = [r["woke"] - sent_at[j] for r, j in zip(results, waiters, strict=True)]
    assert max(delays) <= 1.0, f"a waiter resumed {max(delays):.2f}s after its signal"


async def test_a_wait_returns_none_at_its_timeout_and_a_signal_sent_before_returns_at_once(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    spawn_worker("waity", JOBS_JOB_TYPE_MODULES=MODULES)
    lonely = (await client.create(job_type="waiter", name="never", timeout=2)).job.id
    early = (await client.create(job_type="waiter", name="early", timeout=60)).job.id
    await client.jobs.SendSignal(
        jpb.SendSignalRequest(
            job_id=early, user_id="user-1", name="early", payload=struct_from_dict({"ok": True})
        )
    )
    for job_id in (lonely, early):
        await eventually(
            lambda job_id=job_id: db.fetchval(
                "SELECT status = 'succeeded' FROM jobs WHERE id = $1", job_id
            ),
            timeout=20,
            message="a waiter did not finish",
        )
    timed_out, signalled = await outputs(client, [lonely, early])
    assert timed_out["payload"] is None
    assert signalled["payload"] == {"ok": True}
    reasons = await db.fetch(
        "SELECT job_id::text AS job_id, reason FROM job_events WHERE job_id = ANY($1::uuid[])"
        " AND reason = 'SUSPENDED_SIGNAL'",
        [lonely, early],
    )
    # the lonely one waited (once: its timeout woke it); the early one never had to
    assert [r["job_id"] for r in reasons] == [lonely]
