"""WatchHub with partial output, on fakes: pieces come between the job's states, only when
asked for, the subscription lives exactly as long as the watch, and a slow watcher keeps
the newest pieces."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

from job_service.domain.jobs import Job
from job_service.domain.lifecycle import JobStatus
from job_service.usecases import watch as watch_module
from job_service.usecases.watch import WatchHub
from shared.registry import Registry, default_registry
from tests.support.fakes import FakeJobListingStore, FakePartialOutputFeed
from tests.support.fakes.jobs import job
from tests.support.wait import eventually


async def start(
    hub: WatchHub, listing: FakeJobListingStore, partial_output: bool
) -> tuple[list[Job | bytes], asyncio.Task[None]]:
    seen: list[Job | bytes] = []

    async def read() -> Job | None:
        return listing.jobs.get("j1")

    async def watch() -> None:
        async for item in hub.watch("j1", read, partial_output=partial_output):
            seen.append(item)

    task = asyncio.create_task(watch())
    await eventually(lambda: hub.watching == 1 and len(seen) == 1)
    return seen, task


async def test_pieces_come_between_the_states_and_the_subscription_ends_with_the_watch() -> None:
    listing, feed = FakeJobListingStore(), FakePartialOutputFeed()
    hub = WatchHub(listing, feed, default_registry())  # type: ignore[arg-type]
    listing.jobs["j1"] = job("j1", JobStatus.RUNNING)
    seen, task = await start(hub, listing, partial_output=True)

    feed.publish("j1", b"one")
    feed.publish("j1", b"two")
    await eventually(lambda: len(seen) == 3)
    listing.jobs["j1"] = job("j1", JobStatus.SUCCEEDED, progress=1.0)
    await hub.poll()
    await asyncio.wait_for(task, 1)

    assert [i if isinstance(i, bytes) else i.status for i in seen] == [
        JobStatus.RUNNING, b"one", b"two", JobStatus.SUCCEEDED,
    ]  # fmt: skip
    assert feed.subscribed == ["j1"] and feed.sinks == {}  # unsubscribed at the end


async def test_without_the_flag_there_is_no_subscription() -> None:
    listing, feed = FakeJobListingStore(), FakePartialOutputFeed()
    hub = WatchHub(listing, feed, default_registry())  # type: ignore[arg-type]
    listing.jobs["j1"] = job("j1", JobStatus.RUNNING)
    _, task = await start(hub, listing, partial_output=False)

    assert feed.subscribed == []
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_watcher_that_falls_behind_keeps_the_newest_pieces() -> None:
    listing, feed = FakeJobListingStore(), FakePartialOutputFeed()
    hub = WatchHub(listing, feed, default_registry())  # type: ignore[arg-type]
    listing.jobs["j1"] = job("j1", JobStatus.RUNNING)
    seen, task = await start(hub, listing, partial_output=True)
    limit = watch_module.MAX_PENDING_PIECES

    for n in range(limit + 5):  # all before the watcher runs again
        feed.publish("j1", str(n).encode())
    await eventually(lambda: len(seen) == 1 + limit)

    assert seen[1] == b"5" and seen[-1] == str(limit + 4).encode()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert feed.sinks == {}


async def test_a_job_whose_type_redacts_output_gets_no_pieces() -> None:
    listing, feed = FakeJobListingStore(), FakePartialOutputFeed()
    redacting = Registry(
        dataclasses.replace(d, output_redaction=frozenset({"data"}))
        if d.job_type == "synthetic"
        else d
        for d in default_registry()
    )
    hub = WatchHub(listing, feed, redacting)  # type: ignore[arg-type]
    listing.jobs["j1"] = job("j1", JobStatus.RUNNING)
    seen, task = await start(hub, listing, partial_output=True)

    feed.publish("j1", b"secret")
    listing.jobs["j1"] = job("j1", JobStatus.SUCCEEDED, progress=1.0)
    await hub.poll()
    await asyncio.wait_for(task, 1)

    assert [i if isinstance(i, bytes) else i.status for i in seen] == [
        JobStatus.RUNNING, JobStatus.SUCCEEDED,
    ]  # fmt: skip


async def test_a_hub_without_a_registry_relays_nothing() -> None:
    listing, feed = FakeJobListingStore(), FakePartialOutputFeed()
    hub = WatchHub(listing, feed)  # type: ignore[arg-type]
    listing.jobs["j1"] = job("j1", JobStatus.RUNNING)
    seen, task = await start(hub, listing, partial_output=True)

    feed.publish("j1", b"secret")
    listing.jobs["j1"] = job("j1", JobStatus.SUCCEEDED, progress=1.0)
    await hub.poll()
    await asyncio.wait_for(task, 1)

    assert b"secret" not in seen
