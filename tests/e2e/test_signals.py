"""Signals end to end, with workers as a user runs them: a signal sent before the job
starts, one while it runs and one while its worker is dead (SIGKILL) all reach the job's
code — the last on its next attempt — in send order and never twice in one attempt."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import asyncpg

from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.processes import WorkerProcess
from tests.support.stack import Client
from tests.support.wait import eventually
from worker_service.app import WorkerApp

SpawnWorker = Callable[..., WorkerProcess]


async def send(client: Client, job_id: str, name: str, **payload: Any) -> int:
    answer = await client.jobs.SendSignal(
        jpb.SendSignalRequest(
            job_id=job_id, user_id="user-1", name=name, payload=struct_from_dict(payload)
        )
    )
    return answer.signal.seq


async def job_row(db: asyncpg.Connection, job_id: str) -> asyncpg.Record:
    return await db.fetchrow(
        "SELECT status, locked_by, progress, attempt_count FROM jobs WHERE id = $1", job_id
    )


def seen(job: job_pb2.Job) -> list[tuple[str, dict[str, Any]]]:
    output = dict(job.output)
    return [(s["name"], dict(s["payload"])) for s in output["signals"]]


async def test_signals_sent_before_during_and_while_the_worker_is_dead_are_all_seen(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    job = (
        await client.create(wait_signals=["before", "during", "killed"], signal_timeout_ms=60_000)
    ).job
    assert await send(client, job.id, "before", n=1) == 1  # no worker runs yet
    first = spawn_worker("first")

    async def progress_at_least(fraction: float) -> bool:
        row = await job_row(db, job.id)
        return row["locked_by"] == "first" and row["progress"] >= fraction - 1e-9

    # the heartbeat carries the job's progress: one step per signal its code received
    await eventually(lambda: progress_at_least(1 / 3), timeout=20, message="'before' unseen")
    assert await send(client, job.id, "during", n=2) == 2
    await eventually(lambda: progress_at_least(2 / 3), timeout=10, message="'during' unseen")

    first.signal(signal.SIGKILL)
    await first.wait(5)
    assert await send(client, job.id, "killed", n=3) == 3  # nobody runs it now
    spawn_worker("second")

    async def finished() -> bool:
        return (await job_row(db, job.id))["status"] == "succeeded"

    await eventually(finished, timeout=30, message="the job did not finish")
    done = await client.get(job.id)
    assert done.attempt_count == 2
    # the second attempt saw all three, in send order, once each (the job polls for more
    # of each name at its end: a repeat would show)
    assert seen(done) == [("before", {"n": 1}), ("during", {"n": 2}), ("killed", {"n": 3})]
    assert [(s.seq, s.name) for s in done.signals] == [(1, "before"), (2, "during"), (3, "killed")]


async def test_signals_of_one_name_arrive_in_send_order_once_each(
    client: Client, db: asyncpg.Connection, worker: WorkerApp
) -> None:
    job = (await client.create(wait_signals=["edit"], sleep_ms=1500)).job

    async def running() -> bool:
        return (await job_row(db, job.id))["status"] == "running"

    await eventually(running, timeout=15, message="never started")
    for n in range(1, 6):
        await send(client, job.id, "edit", n=n)
        await send(client, job.id, "other", n=n)  # not asked for: never handed over

    async def finished() -> bool:
        return (await job_row(db, job.id))["status"] == "succeeded"

    await eventually(finished, timeout=20, message="the job did not finish")
    done = await client.get(job.id)
    assert seen(done) == [("edit", {"n": n}) for n in range(1, 6)]
