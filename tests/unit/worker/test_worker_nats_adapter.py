"""The NATS adapters' translations, against fake subscriptions and messages (no sockets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import nats.errors
import pytest

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
