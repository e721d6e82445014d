"""The worker's side of grants ahead (ADR 0009): jobs granted with its results and pushed
down its session run in their queue's slots, each result asks for the slot it frees, and
the slot report the session sends says what is free and what was taken."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from worker_service.grants_ahead import GrantsAhead
from worker_service.worker import Worker

from .fakes import (
    QUEUE,
    FakeDelivery,
    FakeExecutor,
    FakeSource,
    ProbeLog,
    eventually,
    locked,
    probe_definition,
)


def make_worker(executor: FakeExecutor, source: FakeSource, probe: ProbeLog, slots: int) -> Worker:
    return Worker(
        executor=executor,
        source=source,
        lookup={"probe": probe_definition(probe)}.__getitem__,
        slots={QUEUE: slots},
        worker_id="w-test",
        fetch_timeout_s=0.05,
        shutdown_grace_s=5.0,
        runnable=["probe@1"],
        grants_ahead=True,
    )


@pytest.fixture
async def worker(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> AsyncIterator[Worker]:
    async with make_worker(executor, source, probe, slots=2) as running:
        yield running


def grants(worker: Worker) -> GrantsAhead:
    grants = worker._results.grants
    assert grants is not None
    return grants


async def test_a_result_asks_for_its_slot_and_the_job_granted_with_it_runs(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.lock_as(locked("j1"))
    executor.grants_on_submit = [locked("j2")]
    source.put(FakeDelivery.of("j1"))

    await eventually(lambda: len(executor.results) == 2, what="both results")

    assert executor.wanted[0] == {QUEUE: 1}
    assert probe.finished == ["j1", "j2"]
    assert executor.lock_calls == [("j1", "w-test")]  # no LockJobs for the granted job


async def test_pushed_jobs_run_and_are_counted_as_taken(
    worker: Worker, executor: FakeExecutor, probe: ProbeLog
) -> None:
    assert grants(worker).report() == ({QUEUE: 2}, 0)

    grants(worker).pushed([locked("p1", mode="sleep", sleep_s=0.2)])

    free, taken = grants(worker).report()
    assert (free, taken) == ({QUEUE: 1}, 1)
    await eventually(lambda: executor.results, what="the pushed job's result")
    assert executor.results[0]["job_id"] == "p1"
    assert executor.lock_calls == []
    await eventually(lambda: grants(worker).report() == ({QUEUE: 2}, 1), what="its slot back")


async def test_a_full_queue_reports_nothing_free_and_a_new_session_counts_from_zero(
    worker: Worker,
) -> None:
    grants(worker).pushed(
        [locked("p1", mode="sleep", sleep_s=5), locked("p2", mode="sleep", sleep_s=5)]
    )

    assert grants(worker).report() == ({}, 2)
    grants(worker).session_opened()
    assert grants(worker).report() == ({}, 0)


async def test_a_stopping_worker_asks_for_no_more_jobs_and_finishes_grants_already_sent(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    running = make_worker(executor, source, probe, slots=2)
    await running.start()
    ahead = grants(running)
    ahead.pushed([locked("p1", mode="sleep", sleep_s=0.3)])
    stopping = asyncio.create_task(running.stop())

    await eventually(lambda: ahead.report() == ({}, 1), what="no slot reported free")
    ahead.pushed([locked("late")])  # pushed before the job service saw that report
    await stopping

    assert sorted(r["job_id"] for r in executor.results) == ["late", "p1"]
    assert executor.wanted == []  # the results of a stopping worker ask for nothing
