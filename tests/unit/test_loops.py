"""The supervisor of job_service's loops: a loop that ends on its own stops the service;
stopping asks every loop in order and cancels those that outstay the grace period."""

from __future__ import annotations

import asyncio

import pytest

from job_service.loops import Supervisor
from tests.support.wait import eventually


class Loop:
    def __init__(self, stopped: list[str], name: str, *, stubborn: bool = False) -> None:
        self.name = name
        self.stubborn = stubborn
        self.stopped = stopped
        self.stopping = asyncio.Event()
        self.cancelled = False

    async def run(self) -> None:
        try:
            await self.stopping.wait()
            if self.stubborn:
                await asyncio.Event().wait()  # ignores stop(): only a cancel ends it
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    def stop(self) -> None:
        self.stopped.append(self.name)
        self.stopping.set()


class Failing:
    async def run(self) -> None:
        raise RuntimeError("the database went away for good")

    def stop(self) -> None:
        pass


async def test_stopping_asks_every_loop_in_order_and_cancels_the_stubborn_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    order: list[str] = []
    polite, stubborn = Loop(order, "dispatcher"), Loop(order, "reaper", stubborn=True)
    stopped = asyncio.Event()
    supervisor = Supervisor([("dispatcher", polite), ("reaper", stubborn)], stopped=stopped)
    supervisor.start()
    await asyncio.sleep(0)

    await asyncio.wait_for(supervisor.stop(grace_s=0.05), 2)

    assert order == ["dispatcher", "reaper"]
    assert not polite.cancelled and stubborn.cancelled
    assert stopped.is_set()
    assert not [r for r in caplog.records if "ended" in r.getMessage()]  # told to end


async def test_a_loop_that_ends_on_its_own_stops_the_whole() -> None:
    order: list[str] = []
    stopped = asyncio.Event()
    supervisor = Supervisor([("firing", Failing()), ("reaper", Loop(order, "reaper"))], stopped)
    supervisor.start()

    await eventually(stopped.is_set)

    await supervisor.stop(grace_s=1)
    assert order == ["reaper"]


async def test_stopping_before_starting_only_asks() -> None:
    order: list[str] = []
    supervisor = Supervisor([("reaper", Loop(order, "reaper"))], asyncio.Event())

    await supervisor.stop(grace_s=1)

    assert order == ["reaper"]
