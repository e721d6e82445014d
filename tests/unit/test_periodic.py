"""Housekeeping loops run again at once while there is more, and stop when told."""

from __future__ import annotations

import asyncio

from job_service.periodic import Periodic
from tests.support.wait import eventually


async def test_full_batches_run_again_at_once_then_wait_for_the_interval() -> None:
    backlog = [5, 5, 2]  # two full batches of 5, then a partial one
    calls: list[int] = []

    async def work() -> int:
        handled = backlog.pop(0) if backlog else 0
        calls.append(handled)
        return handled

    periodic = Periodic("test", work, interval_s=3600, batch=5)
    run = asyncio.create_task(periodic.run())
    await eventually(lambda: len(calls) == 3)

    periodic.stop()
    await asyncio.wait_for(run, 1)  # the hour-long wait ends at once
    assert calls == [5, 5, 2]


async def test_a_failing_round_is_retried_not_fatal() -> None:
    attempts = 0

    async def work() -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError("database restarting")
        return 0

    periodic = Periodic("test", work, interval_s=0.01, batch=5)
    run = asyncio.create_task(periodic.run())
    await eventually(lambda: attempts >= 2)

    periodic.stop()
    await asyncio.wait_for(run, 1)
    assert not run.cancelled() and run.exception() is None
