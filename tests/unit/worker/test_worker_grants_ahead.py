"""The worker's side of grants ahead (ADR 0009): jobs granted with its results and pushed
down its session run in their queue's slots, each result asks for the slot it frees while
the queue is backed up (and only then), and the slot report the session sends says what is
free and what was taken."""

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
        lock_on_submit=True,
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


async def test_while_the_queue_is_backed_up_each_result_asks_for_its_slot(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    # a fetch that comes back full (two messages for two free slots): the queue is backed up
    executor.lock_as(locked("j1"))
    executor.lock_as(locked("j2"))
    executor.grants_on_submit = [locked("j3"), locked("j4")]
    source.put(FakeDelivery.of("j1"))
    source.put(FakeDelivery.of("j2"))

    await eventually(lambda: len(executor.results) == 4, what="four results")

    # every call asked for as many jobs as it carried results (the slots they free)
    assert executor.wanted == [{QUEUE: len(batch)} for batch in executor.result_batches]
    assert sorted(probe.finished) == ["j1", "j2", "j3", "j4"]
    # no LockJobs for the jobs granted with results
    assert sorted(executor.lock_calls) == [("j1", "w-test"), ("j2", "w-test")]


async def test_results_ask_for_nothing_while_the_queue_is_not_backed_up(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    # one message for two free slots: nothing else waits, a new job is the push's to deliver
    executor.lock_as(locked("j1"))
    executor.grants_on_submit = [locked("stolen")]
    source.put(FakeDelivery.of("j1"))

    await eventually(lambda: len(executor.results) == 1, what="the result")

    assert executor.wanted == []
    assert probe.finished == ["j1"]


async def test_results_granted_fewer_than_asked_stop_asking(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    async with make_worker(executor, source, probe, slots=1) as worker:
        executor.lock_as(locked("j1", mode="sleep", sleep_s=0.05))
        executor.grants_on_submit = []  # the queue ran dry meanwhile
        source.put(FakeDelivery.of("j1"))  # one message for one slot: a full fetch
        await eventually(lambda: len(executor.results) == 1, what="the first result")
        grants(worker).pushed([locked("p1")])

        await eventually(lambda: len(executor.results) == 2, what="the pushed job's result")

    assert executor.wanted == [{QUEUE: 1}]  # the first result asked; the second did not


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


async def test_a_report_is_due_when_a_fetched_job_takes_a_slot_not_for_pushed_ones(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    async with make_worker(executor, source, probe, slots=8) as worker:
        slots = grants(worker)
        assert slots.drifted()  # nothing reported yet
        slots.report()
        assert not slots.drifted()

        # pushed jobs running: the job service counts them itself, its view is still right
        slots.pushed([locked(f"p{n}", mode="sleep", sleep_s=0.3) for n in range(3)])
        assert not slots.drifted()

        # a fetched job takes a slot the job service does not know is gone: worth saying
        executor.lock_as(locked("f1", mode="sleep", sleep_s=0.3))
        source.put(FakeDelivery.of("f1"))
        await eventually(slots.drifted, what="a drift")
        slots.report()
        assert not slots.drifted()


async def test_a_report_is_due_when_the_job_service_sees_under_half_the_free_slots(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    async with make_worker(executor, source, probe, slots=8) as worker:
        slots = grants(worker)
        slots.report()
        slots.pushed([locked(f"p{n}") for n in range(4)])  # its view: 4 free
        await eventually(lambda: len(executor.results) == 4, what="the pushed jobs' results")
        assert not slots.drifted()  # 4 of 8: not under half

        slots.pushed([locked("p4")])  # its view: 3, while 8 are free once it ends
        await eventually(lambda: len(executor.results) == 5, what="the fifth result")
        assert slots.drifted()
