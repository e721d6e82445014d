"""The NATS adapters' translations, against fake subscriptions and messages (no sockets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
import pytest

from shared.constants import dispatch_subject
from shared.startup import within_startup
from worker_service.adapters.nats import CancelListener, NatsDispatchSource, SignalListener
from worker_service.domain.errors import DispatchUnavailable

from .fakes import FakeDelivery


@dataclass
class FakeMsg:
    data: bytes


class FakePullSubscription:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[int, float]] = []

    async def fetch(self, batch: int, **options: float) -> Any:
        self.calls.append((batch, options["timeout"]))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def source_with(sub: FakePullSubscription) -> NatsDispatchSource:
    source = NatsDispatchSource(js=None)  # type: ignore[arg-type]
    source._subs["ai-interactive"] = sub  # type: ignore[assignment]
    return source


async def test_fetch_passes_batch_and_wait_through() -> None:
    messages = [FakeDelivery(b"1"), FakeDelivery(b"2")]
    sub = FakePullSubscription(messages)

    assert list(await source_with(sub).fetch("ai-interactive", 7, 0.5)) == messages
    assert sub.calls == [(7, 0.5)]


async def test_an_idle_fetch_returns_nothing() -> None:
    sub = FakePullSubscription(nats.errors.TimeoutError())
    assert await source_with(sub).fetch("ai-interactive", 1, 0.5) == []


async def test_an_idle_fetch_ending_in_a_plain_asyncio_timeout_returns_nothing() -> None:
    # nats-py 2.16 raises asyncio's TimeoutError, not its own, when the server's answer to
    # its no-wait probe comes close to the deadline; it once stopped a worker.
    sub = FakePullSubscription(TimeoutError())
    assert await source_with(sub).fetch("ai-interactive", 1, 0.5) == []


async def test_a_broken_connection_is_dispatch_unavailable() -> None:
    sub = FakePullSubscription(nats.errors.ConnectionClosedError())
    with pytest.raises(DispatchUnavailable):
        await source_with(sub).fetch("ai-interactive", 1, 0.5)


async def test_cancel_messages_reach_the_callback_and_bad_ones_are_ignored() -> None:
    heard: list[str] = []
    listener = CancelListener(nc=None, on_cancel=heard.append)  # type: ignore[arg-type]

    await listener._received(FakeMsg(b'{"job_id": "j1"}'))  # type: ignore[arg-type]
    await listener._received(FakeMsg(b"garbage"))  # type: ignore[arg-type]

    assert heard == ["j1"]


async def test_signal_notices_reach_the_callback_and_bad_ones_are_ignored() -> None:
    heard: list[tuple[str, int]] = []
    listener = SignalListener(nc=None, on_signal=lambda j, s: heard.append((j, s)))  # type: ignore[arg-type]

    await listener._received(FakeMsg(b'{"job_id": "j1", "seq": 3}'))  # type: ignore[arg-type]
    await listener._received(FakeMsg(b'{"job_id": "j1"}'))  # type: ignore[arg-type]

    assert heard == [("j1", 3)]


class ElectingJetStream:
    """A JetStream cluster still electing: the consumer declarations of the first
    ``timeouts`` calls time out (one queue got through before the first one did)."""

    def __init__(self, timeouts: int) -> None:
        self.timeouts = timeouts
        self.subscribed: list[str] = []

    async def stream_info(self, name: str) -> Any:
        raise nats.js.errors.NotFoundError

    async def add_stream(self, config: Any) -> None:
        return None

    async def add_consumer(self, stream: str, config: Any) -> None:
        if config.durable_name.endswith("batch") and self.timeouts:
            self.timeouts -= 1
            raise nats.errors.TimeoutError

    async def pull_subscribe(self, subject: str, **options: Any) -> str:
        self.subscribed.append(subject)
        return subject


async def test_a_subscribe_cut_off_by_an_election_is_retried_at_start_up_once_per_queue() -> None:
    """A worker started while the NATS cluster elected its leaders died on its first
    timed-out declaration (the cluster chaos profile: no worker ever ran a job)."""
    js = ElectingJetStream(timeouts=2)
    source = NatsDispatchSource(js)  # type: ignore[arg-type]

    await within_startup(
        "JetStream dispatch consumers",
        5.0,
        lambda: source.subscribe(["ai-interactive", "ai-batch"]),
        retry_interval_s=0.01,
    )

    assert sorted(js.subscribed) == sorted(
        [dispatch_subject("ai-interactive"), dispatch_subject("ai-batch")]
    )
