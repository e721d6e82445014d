"""An attempt's signals: send order, each once per attempt, repeats of a fetch dropped, a
missed notice caught up by the heartbeat, and a retried attempt seeing everything again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from jobtypes import synthetic
from shared.errors import LeaseLost
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.domain.model import HeartbeatReply, Signal, parse_signal_notice
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher
from worker_service.signals import AttemptSignals, SignalInbox

from .fakes import FakeExecutor, eventually, locked

SENT = datetime(2026, 1, 1, tzinfo=UTC)


def sig(seq: int, name: str = "go", **payload: Any) -> Signal:
    return Signal(seq, name, payload or {"n": seq}, SENT)


# --- the inbox (pure) ----------------------------------------------------------------------


def test_signals_are_taken_in_send_order_each_once_per_name() -> None:
    inbox = SignalInbox()
    inbox.add([sig(3, "go"), sig(1, "go"), sig(2, "stop")], complete=True)

    assert [inbox.take("go"), inbox.take("go"), inbox.take("go")] == [sig(1), sig(3), None]
    assert inbox.take("stop") == sig(2, "stop")
    assert inbox.take("stop") is None


def test_a_repeated_or_overlapping_fetch_adds_nothing_twice() -> None:
    inbox = SignalInbox()
    assert inbox.add([sig(1), sig(2)], complete=True) == 2
    assert inbox.take("go") == sig(1)

    assert inbox.add([sig(2), sig(3)], complete=True) == 1

    assert [inbox.take("go"), inbox.take("go"), inbox.take("go")] == [sig(2), sig(3), None]


def test_the_inbox_is_behind_until_its_first_complete_fetch_and_after_news() -> None:
    inbox = SignalInbox()
    assert inbox.behind
    inbox.add([sig(1)], complete=False)  # cut at the fetch limit
    assert inbox.behind
    inbox.add([], complete=True)
    assert not inbox.behind

    assert not inbox.announce(1)  # old news
    assert inbox.announce(4)
    assert inbox.behind and inbox.fetched_seq == 1
    inbox.add([sig(2), sig(3), sig(4)], complete=True)
    assert not inbox.behind


def test_a_signal_notice_names_a_job_and_a_positive_seq() -> None:
    assert parse_signal_notice(b'{"job_id": "j1", "seq": 7}') == ("j1", 7)
    for bad in (b"{}", b'{"job_id": "j1"}', b'{"job_id": "j1", "seq": 0}', b'{"seq": 1}', b"x"):
        with pytest.raises(ValueError):
            parse_signal_notice(bad)


# --- waiting and fetching ------------------------------------------------------------------


class Store:
    """What FetchSignals would find: the signals stored so far."""

    def __init__(self) -> None:
        self.signals: list[Signal] = []
        self.fetches: list[int] = []
        self.errors: list[Exception] = []

    async def fetch(self, after_seq: int) -> tuple[Sequence[Signal], bool]:
        self.fetches.append(after_seq)
        if self.errors:
            raise self.errors.pop(0)
        return [s for s in self.signals if s.seq > after_seq], False


async def test_a_signal_sent_before_the_first_ask_is_waiting_for_it() -> None:
    store = Store()
    store.signals.append(sig(1, "approve", ok=True))
    signals = AttemptSignals(store.fetch)

    assert await signals.wait("approve", timeout=1) == {"ok": True}
    assert await signals.poll("approve") is None
    assert store.fetches == [0]  # no news since: one fetch only


async def test_a_notice_wakes_a_waiting_signal_call() -> None:
    store = Store()
    signals = AttemptSignals(store.fetch)
    waiting = asyncio.create_task(signals.wait("approve", timeout=5))
    await eventually(lambda: store.fetches == [0], what="the first fetch")

    store.signals.append(sig(1, "approve", ok=True))
    signals.announce(1)

    assert await waiting == {"ok": True}


async def test_without_news_no_signal_arrives_and_the_wait_times_out() -> None:
    store = Store()
    signals = AttemptSignals(store.fetch)
    store_signal_without_notice = sig(1, "approve")

    waiting = asyncio.create_task(signals.wait("approve", timeout=0.3))
    await eventually(lambda: store.fetches == [0], what="the first fetch")
    store.signals.append(store_signal_without_notice)  # its notice was lost

    with pytest.raises(TimeoutError):
        await waiting


async def test_a_transient_fetch_failure_is_retried_while_waiting() -> None:
    store = Store()
    store.errors.append(ExecutorUnreachable("down"))
    store.signals.append(sig(1, "approve", ok=True))
    signals = AttemptSignals(store.fetch)

    assert await signals.wait("approve", timeout=5) == {"ok": True}
    assert store.fetches == [0, 0]


async def test_a_lost_lease_ends_the_wait() -> None:
    store = Store()
    store.errors.append(LeaseLost("gone"))

    with pytest.raises(LeaseLost):
        await AttemptSignals(store.fetch).wait("approve", timeout=5)


async def test_a_notice_during_a_fetch_that_missed_it_is_fetched_again() -> None:
    store = Store()
    gate = asyncio.Event()

    async def slow_fetch(after_seq: int) -> tuple[Sequence[Signal], bool]:
        found = [s for s in store.signals if s.seq > after_seq]  # read before the commit
        store.fetches.append(after_seq)
        await gate.wait()
        return found, False

    signals = AttemptSignals(slow_fetch)
    waiting = asyncio.create_task(signals.wait("approve", timeout=5))
    await eventually(lambda: store.fetches == [0], what="the first fetch")
    store.signals.append(sig(1, "approve", ok=True))
    signals.announce(1)  # arrives while the fetch that did not see it is in flight
    gate.set()

    assert await waiting == {"ok": True}


# --- through the pipeline, with the synthetic job type ---------------------------------------


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
async def results(executor: FakeExecutor) -> AsyncIterator[ResultBatcher]:
    async with ResultBatcher(executor) as batcher:
        yield batcher


@pytest.fixture
def pipeline(executor: FakeExecutor, results: ResultBatcher) -> Pipeline:
    definitions = {"synthetic": synthetic.DEFINITION}
    return Pipeline(executor, results, definitions.__getitem__, worker_id="w-test")


def waiting_job(job_id: str, attempt: int = 1, heartbeat_ms: int = 1000) -> Any:
    return locked(
        job_id,
        attempt=attempt,
        heartbeat_ms=heartbeat_ms,
        job_type="synthetic",
        wait_signals=["a", "b"],
        signal_timeout_ms=10_000,
    )


def payloads(result: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(s["name"], s["payload"]) for s in result["output"]["signals"]]


async def test_a_running_job_sees_a_notified_signal_and_a_retry_sees_all_again(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.signals["j1"] = [sig(1, "a", v=1)]
    run = asyncio.create_task(pipeline.run(waiting_job("j1")))
    await eventually(lambda: len(executor.signal_fetches) == 1, what="the first fetch")

    executor.signals["j1"].append(sig(2, "b", v=2))
    assert pipeline.signal("j1", 2)
    await asyncio.wait_for(run, 5)

    [first] = executor.results
    assert payloads(first) == [("a", {"v": 1}), ("b", {"v": 2})]

    await pipeline.run(waiting_job("j1", attempt=2))

    assert payloads(executor.results[1]) == [("a", {"v": 1}), ("b", {"v": 2})]


async def test_a_missed_notice_is_caught_up_by_the_next_heartbeat(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.signals["j1"] = [sig(1, "a")]
    executor.on_heartbeat = lambda n: HeartbeatReply(False, latest_signal_seq=2)
    run = asyncio.create_task(pipeline.run(waiting_job("j1", heartbeat_ms=50)))
    await eventually(lambda: len(executor.signal_fetches) == 1, what="the first fetch")

    executor.signals["j1"].append(sig(2, "b"))  # and no notice

    await asyncio.wait_for(run, 5)
    assert [name for name, _ in payloads(executor.results[0])] == ["a", "b"]


async def test_a_signal_delivered_twice_by_notices_reaches_job_code_once(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.signals["j1"] = [sig(1, "a"), sig(2, "b")]
    run = asyncio.create_task(pipeline.run(waiting_job("j1")))
    for _ in range(3):  # duplicated notices
        pipeline.signal("j1", 2)

    await asyncio.wait_for(run, 5)
    assert [name for name, _ in payloads(executor.results[0])] == ["a", "b"]


async def test_a_notice_for_a_job_not_running_here_is_ignored(pipeline: Pipeline) -> None:
    assert not pipeline.signal("elsewhere", 1)
