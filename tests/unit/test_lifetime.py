"""``async with`` over a Lifetime starts the component, stops it on the way out, waits for
its background ``run()`` and raises that run's failure."""

from __future__ import annotations

import asyncio

import pytest

from shared.lifetime import Lifetime


class Recorder(Lifetime):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")


class Looping(Lifetime):
    """A component with a run() loop that ends when stopped (or fails on its own)."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure
        self.stopping = asyncio.Event()
        self.ended = False

    async def start(self) -> None:
        self.run_in_background(self.run(), "looping")

    async def run(self) -> None:
        if self.failure is not None:
            raise self.failure
        await self.stopping.wait()
        await asyncio.sleep(0)  # run() still has work after stop() returned
        self.ended = True

    async def stop(self) -> None:
        self.stopping.set()


async def test_entering_starts_and_returns_the_component_leaving_stops_it() -> None:
    recorder = Recorder()
    async with recorder as entered:
        assert entered is recorder
        assert recorder.calls == ["start"]
    assert recorder.calls == ["start", "stop"]


async def test_leaving_stops_the_component_when_the_block_raises() -> None:
    recorder = Recorder()
    with pytest.raises(LookupError):
        async with recorder:
            raise LookupError("the block failed")
    assert recorder.calls == ["start", "stop"]


async def test_the_default_start_starts_nothing() -> None:
    class Stoppable(Lifetime):
        stopped = 0

        async def stop(self) -> None:
            self.stopped += 1

    async with Stoppable() as component:
        pass
    assert component.stopped == 1


async def test_leaving_waits_for_the_background_run_to_end() -> None:
    async with Looping() as component:
        await asyncio.sleep(0)
        assert not component.ended
    assert component.ended


async def test_leaving_raises_the_failure_of_the_background_run() -> None:
    with pytest.raises(ConnectionError, match="lost"):
        async with Looping(ConnectionError("lost")):
            await asyncio.sleep(0)


def test_a_component_must_say_how_it_stops() -> None:
    class Unstoppable(Lifetime):
        pass

    with pytest.raises(TypeError):
        Unstoppable()  # type: ignore[abstract]
