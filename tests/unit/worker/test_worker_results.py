"""The result batcher: many results per SubmitResults call, each waiter its own answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shared.errors import LeaseLost
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable
from worker_service.results import ResultBatcher

from .fakes import FakeExecutor, eventually, submission


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
async def batcher(executor: FakeExecutor) -> AsyncIterator[ResultBatcher]:
    async with ResultBatcher(executor) as running:
        yield running


def submit(batcher: ResultBatcher, job_id: str, timeout_s: float = 5.0) -> asyncio.Task[str]:
    return asyncio.create_task(batcher.submit(submission(job_id), timeout_s=timeout_s))


async def fill_both_calls(
    executor: FakeExecutor, batcher: ResultBatcher
) -> list[asyncio.Task[str]]:
    """Holds SubmitResults calls until ``executor.results_gate`` is set, with one result in
    each of the two calls the batcher may have in flight."""
    executor.results_gate = asyncio.Event()
    first = submit(batcher, "first")
    await eventually(lambda: executor.results_in_flight == 1, what="the first call")
    second = submit(batcher, "second")
    await eventually(lambda: executor.results_in_flight == 2, what="the second call")
    return [first, second]


async def test_a_lone_result_is_sent_at_once(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    status = await asyncio.wait_for(batcher.submit(submission("j1"), timeout_s=3), 5)

    assert status == "SUCCEEDED"
    assert executor.result_batches == [["j1"]]
    assert executor.result_timeouts == [3]
    assert executor.results[0]["lease_token"] == "token-j1"


async def test_results_finishing_together_go_in_one_call(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    waiters = [submit(batcher, f"j{n}") for n in range(5)]

    assert await asyncio.wait_for(asyncio.gather(*waiters), 5) == ["SUCCEEDED"] * 5
    assert executor.result_batches == [["j0", "j1", "j2", "j3", "j4"]]


async def test_results_finishing_during_busy_calls_ride_in_the_next_one(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    held = await fill_both_calls(executor, batcher)
    later = [submit(batcher, f"j{n}") for n in range(3)]
    await eventually(lambda: batcher.queued == 3, what="three queued results")
    assert len(executor.result_batches) == 2  # never more than two calls in flight

    assert executor.results_gate is not None
    executor.results_gate.set()

    await asyncio.wait_for(asyncio.gather(*held, *later), 5)
    assert executor.result_batches == [["first"], ["second"], ["j0", "j1", "j2"]]


async def test_a_call_carries_at_most_256_results(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    held = await fill_both_calls(executor, batcher)
    later = [submit(batcher, f"j{n}") for n in range(300)]
    await eventually(lambda: batcher.queued == 300, what="300 queued results")
    assert executor.results_gate is not None
    executor.results_gate.set()

    await asyncio.wait_for(asyncio.gather(*held, *later), 5)
    assert [len(batch) for batch in executor.result_batches] == [1, 1, 256, 44]


async def test_a_call_is_bounded_by_the_strictest_timeout_of_its_results(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    waiters = [submit(batcher, "a", 8.0), submit(batcher, "b", 1.5), submit(batcher, "c", 4.0)]

    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert executor.result_timeouts == [1.5]


async def test_a_refused_item_fails_only_its_own_waiter(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    executor.refusals["j1"] = [LeaseLost("stale token")]
    waiters = [submit(batcher, f"j{n}") for n in range(3)]

    answers = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 5)

    assert executor.result_batches == [["j0", "j1", "j2"]]
    assert answers[0] == answers[2] == "SUCCEEDED"
    assert isinstance(answers[1], LeaseLost)
    assert [r["job_id"] for r in executor.results] == ["j0", "j2"]


async def test_a_failed_call_fails_every_waiter_of_that_call_only(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    executor.submit_errors = [ExecutorUnreachable("UNAVAILABLE")]
    waiters = [submit(batcher, f"j{n}") for n in range(3)]

    answers = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 5)

    assert all(isinstance(answer, ExecutorUnreachable) for answer in answers)
    # The batcher carries on: the next result goes through.
    assert await asyncio.wait_for(batcher.submit(submission("j9"), timeout_s=1), 5) == "SUCCEEDED"
    assert executor.result_batches == [["j0", "j1", "j2"], ["j9"]]


async def test_a_call_answering_the_wrong_number_of_items_fails_its_waiters(
    batcher: ResultBatcher, executor: FakeExecutor
) -> None:
    async def short_answer(submissions: object, *, timeout_s: float) -> list[str]:
        return ["SUCCEEDED"]

    executor.submit_results = short_answer  # type: ignore[method-assign, assignment]
    waiters = [submit(batcher, "j0"), submit(batcher, "j1")]

    answers = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 5)

    assert all(isinstance(answer, ExecutorCallFailed) for answer in answers)


async def test_stop_flushes_queued_results_and_those_submitted_while_stopping(
    executor: FakeExecutor,
) -> None:
    batcher = ResultBatcher(executor)
    running = asyncio.create_task(batcher.run())
    held = await fill_both_calls(executor, batcher)
    queued = [submit(batcher, "j0"), submit(batcher, "j1")]
    await eventually(lambda: batcher.queued == 2, what="two queued results")

    stopping = asyncio.create_task(batcher.stop())
    late = submit(batcher, "late")
    await eventually(lambda: batcher.queued == 3, what="the late result queued")
    assert not stopping.done()
    assert executor.results_gate is not None
    executor.results_gate.set()

    await asyncio.wait_for(stopping, 5)
    assert running.done() and running.exception() is None
    assert [t.result() for t in [*held, *queued, late]] == ["SUCCEEDED"] * 5
    assert executor.result_batches == [["first"], ["second"], ["j0", "j1", "late"]]
    await batcher.stop()  # idempotent


async def test_a_stopped_batcher_refuses_new_results(executor: FakeExecutor) -> None:
    async with ResultBatcher(executor) as batcher:
        pass

    with pytest.raises(ExecutorCallFailed):
        await batcher.submit(submission("j1"), timeout_s=1)
    assert executor.result_batches == []


async def test_a_cancelled_batcher_answers_every_waiter(executor: FakeExecutor) -> None:
    batcher = ResultBatcher(executor)
    running = asyncio.create_task(batcher.run())
    held = await fill_both_calls(executor, batcher)
    queued = submit(batcher, "j0")
    await eventually(lambda: batcher.queued == 1, what="a queued result")

    running.cancel()

    answers = await asyncio.wait_for(asyncio.gather(*held, queued, return_exceptions=True), 5)
    assert all(isinstance(answer, ExecutorCallFailed) for answer in answers)
    assert running.cancelled()


async def test_a_job_goes_once_per_call(batcher: ResultBatcher, executor: FakeExecutor) -> None:
    # A stale attempt's result still being retried, and the next attempt's result.
    waiters = [submit(batcher, "j0"), submit(batcher, "j1"), submit(batcher, "j0")]

    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert executor.result_batches == [["j0", "j1"], ["j0"]]
