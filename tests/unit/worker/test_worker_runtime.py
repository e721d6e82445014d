"""Dispatch messages to attempts, per-queue slots, and the shutdown order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from shared.errors import ErrorCode, InvalidInput, JobNotFound
from worker_service.domain.errors import (
    DispatchUnavailable,
    ExecutorCallFailed,
    ExecutorUnreachable,
)
from worker_service.domain.model import LockOutcome, LockResult
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


def make_worker(
    executor: FakeExecutor,
    source: FakeSource,
    probe: ProbeLog,
    *,
    slots: int = 4,
    grace_s: float = 5.0,
    fetch_batch: int = 32,
) -> Worker:
    return Worker(
        executor=executor,
        source=source,
        lookup={"probe": probe_definition(probe)}.__getitem__,
        slots={QUEUE: slots},
        worker_id="w-test",
        fetch_batch=fetch_batch,
        fetch_timeout_s=0.05,
        shutdown_grace_s=grace_s,
    )


@pytest.fixture
async def worker(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> AsyncIterator[Worker]:
    async with make_worker(executor, source, probe) as running:
        yield running


async def test_locked_dispatch_is_acked_then_run_and_submitted(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.lock_as(locked("j1"))
    delivery = source.put(FakeDelivery.of("j1"))

    await eventually(lambda: executor.submitted == 1, what="the result")

    assert executor.lock_calls == [("j1", "w-test")]
    assert (delivery.acks, delivery.naks) == (1, [])
    assert probe.finished == ["j1"]
    assert executor.results[0]["job_id"] == "j1"


async def test_unavailable_dispatch_is_acked_and_never_run(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.locks["j1"] = [LockResult(LockOutcome.UNAVAILABLE)]
    delivery = source.put(FakeDelivery.of("j1"))

    await eventually(lambda: delivery.settled, what="the message to be settled")

    assert (delivery.acks, delivery.naks) == (1, [])
    assert probe.started == []
    assert executor.submit_calls == 0


async def test_the_same_dispatch_delivered_twice_runs_once(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    job = locked("j1")
    # The job service locks once; the duplicate finds the job taken.
    executor.locks["j1"] = [
        LockResult(LockOutcome.LOCKED, job=job),
        LockResult(LockOutcome.UNAVAILABLE),
    ]
    first = source.put(FakeDelivery.of("j1"))
    second = source.put(FakeDelivery.of("j1"))

    await eventually(lambda: executor.submitted == 1 and second.settled, what="both settled")

    assert (first.acks, second.acks) == (1, 1)
    assert probe.started == ["j1"]
    assert len(executor.lock_calls) == 2


async def test_not_due_dispatch_is_nakked_until_retry_after(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.locks["j1"] = [LockResult(LockOutcome.NOT_DUE, retry_after=time.time() + 3.0)]
    executor.locks["j2"] = [LockResult(LockOutcome.NOT_DUE, retry_after=time.time() - 10.0)]
    soon = source.put(FakeDelivery.of("j1"))
    overdue = source.put(FakeDelivery.of("j2"))

    await eventually(lambda: soon.settled and overdue.settled, what="both settled")

    assert soon.acks == 0
    [delay] = soon.naks
    assert delay is not None and 2.5 < delay <= 3.0
    assert overdue.naks == [0.05]
    assert probe.started == []


async def test_a_lock_item_failure_naks_that_message_by_its_kind(
    worker: Worker, executor: FakeExecutor, source: FakeSource
) -> None:
    executor.locks["j1"] = [ExecutorUnreachable("UNAVAILABLE")]
    executor.locks["j2"] = [JobNotFound("a bug on the other side")]
    down = source.put(FakeDelivery.of("j1"))
    refused = source.put(FakeDelivery.of("j2"))

    await eventually(lambda: down.settled and refused.settled, what="both settled")

    assert (down.acks, down.naks) == (0, [1.0])
    assert refused.acks == 0 and refused.naks[0] is not None and refused.naks[0] > 1.0


async def test_a_fetched_batch_costs_one_lock_call(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    for n in range(5):
        executor.lock_as(locked(f"j{n}"))
        source.put(FakeDelivery.of(f"j{n}"))

    async with make_worker(executor, source, probe, slots=8):
        await eventually(lambda: len(executor.results) == 5, what="five results")

    assert executor.lock_batches == [[f"j{n}" for n in range(5)]]


async def test_a_fetch_larger_than_a_lock_call_takes_is_split_in_order(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    deliveries = [source.put(FakeDelivery.of(f"j{n}")) for n in range(600)]

    async with make_worker(executor, source, probe, slots=600, fetch_batch=600):
        await eventually(lambda: all(d.settled for d in deliveries), what="all settled")

    assert [len(batch) for batch in executor.lock_batches] == [256, 256, 88]
    assert [j for batch in executor.lock_batches for j in batch] == [f"j{n}" for n in range(600)]
    assert all((d.acks, d.naks) == (1, []) for d in deliveries)


async def test_mixed_lock_answers_in_one_batch_are_settled_per_message(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.lock_as(locked("run"))
    executor.locks["later"] = [LockResult(LockOutcome.NOT_DUE, retry_after=time.time() + 3.0)]
    executor.locks["gone"] = [LockResult(LockOutcome.UNAVAILABLE)]
    executor.locks["odd"] = [ExecutorCallFailed("LockJobs answered outcome 0")]
    names = ["run", "later", "gone", "odd"]
    messages = {name: source.put(FakeDelivery.of(name)) for name in names}
    junk = source.put(FakeDelivery(b"not json"))

    async with make_worker(executor, source, probe, slots=8):
        await eventually(
            lambda: junk.settled and all(m.settled for m in messages.values()),
            what="every message settled",
        )
        await eventually(lambda: executor.submitted == 1, what="the result")

    assert executor.lock_batches == [names]
    assert (messages["run"].acks, messages["run"].naks) == (1, [])
    [delay] = messages["later"].naks
    assert messages["later"].acks == 0 and delay is not None and 2.5 < delay <= 3.0
    assert (messages["gone"].acks, messages["gone"].naks) == (1, [])
    assert (messages["odd"].acks, messages["odd"].naks) == (0, [5.0])
    assert junk.acks == 1
    assert probe.started == ["run"]
    assert [r["job_id"] for r in executor.results] == ["run"]


@pytest.mark.parametrize(
    ("error", "delay"),
    [(ExecutorUnreachable("UNAVAILABLE"), 1.0), (InvalidInput("bad worker_id"), 5.0)],
)
async def test_a_failed_lock_call_hands_back_every_message_of_its_batch(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog, error: Exception, delay: float
) -> None:
    executor.lock_errors = [error]
    deliveries = []
    for n in range(3):
        executor.lock_as(locked(f"j{n}"))
        deliveries.append(source.put(FakeDelivery.of(f"j{n}")))

    async with make_worker(executor, source, probe):
        await eventually(lambda: all(d.settled for d in deliveries), what="all settled")

    assert executor.lock_batches == [["j0", "j1", "j2"]]
    assert [(d.acks, d.naks) for d in deliveries] == [(0, [delay])] * 3
    assert probe.started == []


async def test_messages_settled_without_running_give_their_slots_back(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    gone = source.put(FakeDelivery.of("gone"))
    executor.lock_as(locked("a", mode="hang"))
    source.put(FakeDelivery.of("a"))

    async with make_worker(executor, source, probe, slots=2, grace_s=0) as worker:
        await eventually(lambda: probe.started == ["a"] and gone.settled, what="a running")
        executor.lock_as(locked("b", mode="hang"))
        executor.lock_as(locked("c", mode="hang"))
        source.put(FakeDelivery.of("b"))
        third = source.put(FakeDelivery.of("c"))
        await eventually(lambda: worker.running_jobs == 2, what="two running jobs")

        assert not third.settled  # both slots are held by running jobs
        assert source.batches[0] == 2 and max(source.batches[1:]) == 1

        assert worker.cancel_job("a") is True
        await eventually(lambda: probe.started == ["a", "b", "c"], what="the freed slot used")


async def test_shutdown_waits_for_results_in_flight_and_sends_those_of_the_drain(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.results_gate = gate = asyncio.Event()
    executor.lock_as(locked("a"))
    executor.lock_as(locked("b"))
    executor.lock_as(locked("slow", mode="sleep", sleep_s=0.1))
    for name in ["a", "b", "slow"]:
        source.put(FakeDelivery.of(name))
    worker = make_worker(executor, source, probe)
    run = asyncio.create_task(worker.run())
    await eventually(lambda: executor.results_in_flight >= 1, what="a held results call")

    stopping = asyncio.create_task(worker.stop())
    # The slow job finishes during the drain, while the results call is still held.
    await eventually(lambda: "slow" in probe.finished, what="the slow job to finish")
    assert not stopping.done()
    gate.set()

    await asyncio.wait_for(stopping, 5)
    assert run.done() and run.exception() is None
    assert sorted(r["job_id"] for r in executor.results) == ["a", "b", "slow"]
    assert executor.failures == []


async def test_malformed_dispatch_is_dropped(
    worker: Worker, executor: FakeExecutor, source: FakeSource
) -> None:
    delivery = source.put(FakeDelivery(b"not json"))

    await eventually(lambda: delivery.settled, what="the message to be settled")

    assert delivery.acks == 1
    assert executor.lock_calls == []


async def test_fetches_never_take_more_messages_than_free_slots(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    deliveries = []
    for n in range(5):
        executor.lock_as(locked(f"j{n}", mode="hang"))
        deliveries.append(source.put(FakeDelivery.of(f"j{n}")))

    async with make_worker(executor, source, probe, slots=2, grace_s=0) as worker:
        await eventually(lambda: worker.running_jobs == 2, what="two running jobs")
        assert sum(d.settled for d in deliveries) == 2
        assert max(source.batches) == 2
        assert len(executor.lock_calls) == 2

        assert worker.cancel_job(probe.started[0]) is True
        await eventually(lambda: len(probe.started) == 3, what="a freed slot to be used")
        assert worker.running_jobs == 2
        assert source.batches[-1] == 1


async def test_cancel_job_stops_a_running_job(
    worker: Worker, executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.lock_as(locked("j1", mode="hang"))
    source.put(FakeDelivery.of("j1"))
    await eventually(lambda: probe.started == ["j1"], what="the job to start")

    assert worker.cancel_job("j1") is True

    await eventually(lambda: executor.submitted == 1, what="the cancel to be confirmed")
    assert executor.failures[0]["error_code"] == ErrorCode.CANCELLED
    assert probe.cancelled == ["j1"]


async def test_shutdown_lets_short_jobs_finish_and_hands_back_the_rest(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.lock_as(locked("quick", mode="sleep", sleep_s=0.05))
    executor.lock_as(locked("stuck", mode="hang"))
    source.put(FakeDelivery.of("quick"))
    source.put(FakeDelivery.of("stuck"))
    worker = make_worker(executor, source, probe, grace_s=0.3)
    run = asyncio.create_task(worker.run())
    await eventually(lambda: len(probe.started) == 2, what="both jobs to start")

    await asyncio.wait_for(worker.stop(), 5)

    assert run.done() and run.exception() is None
    assert [r["job_id"] for r in executor.results] == ["quick"]
    assert [(f["job_id"], f["error_code"]) for f in executor.failures] == [
        ("stuck", ErrorCode.WORKER_SHUTDOWN)
    ]
    assert probe.cancelled == ["stuck"]
    await worker.stop()  # idempotent


async def test_messages_fetched_while_stopping_are_handed_back(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    worker = make_worker(executor, source, probe)
    gate, fetching = asyncio.Event(), asyncio.Event()
    real_fetch = source.fetch

    async def slow_fetch(queue: str, batch: int, wait_s: float):  # type: ignore[no-untyped-def]
        fetching.set()
        await gate.wait()
        return await real_fetch(queue, batch, wait_s)

    source.fetch = slow_fetch  # type: ignore[method-assign]
    late = source.put(FakeDelivery.of("j1"))
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(fetching.wait(), 5)
    stopping = asyncio.create_task(worker.stop())
    await eventually(lambda: worker.stopping, what="the stop request")
    gate.set()

    await asyncio.wait_for(stopping, 5)

    assert run.done()
    assert (late.acks, late.naks) == (0, [None])
    assert executor.lock_calls == []


async def test_dispatch_outage_is_retried(
    worker: Worker, executor: FakeExecutor, source: FakeSource
) -> None:
    source.fail_with = [DispatchUnavailable("reconnecting")]
    executor.lock_as(locked("j1"))
    source.put(FakeDelivery.of("j1"))

    await eventually(lambda: executor.submitted == 1, what="the result")


async def test_a_failed_side_loop_stops_the_whole_worker(
    executor: FakeExecutor, source: FakeSource, probe: ProbeLog
) -> None:
    executor.lock_as(locked("j1", mode="sleep", sleep_s=0.05))
    source.put(FakeDelivery.of("j1"))
    worker = make_worker(executor, source, probe)
    run = asyncio.create_task(worker.run())
    await eventually(lambda: probe.started == ["j1"], what="the job to start")

    source.fail_with = [RuntimeError("bug in the intake")]

    with pytest.raises(RuntimeError, match="bug in the intake"):
        await asyncio.wait_for(run, 5)
    # The in-flight job still finished and was reported before the worker stopped.
    assert [r["job_id"] for r in executor.results] == ["j1"]
