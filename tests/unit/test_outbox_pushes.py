"""The outbox dispatcher's pushes wait for nothing (issue 42): a batch's grants are pushed
while earlier batches still wait for their JetStream acks; rows that come while a batch is
in flight make the next batch, unless a full batch waits, which publishes beside it; the
rows a push used are not marked again (their grants' statements did); a stop waits for
every batch in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from job_service.domain.outbox import OutboxMessage
from job_service.usecases.outbox import OutboxDispatcher
from tests.support.wait import eventually

OWNER = "replica-1"


def message(i: int) -> OutboxMessage:
    return OutboxMessage(i, "jobs.dispatch.ai-interactive", f"k{i}", {}, 0)


class Store:
    """The outbox store as the dispatcher uses it: nothing to claim, marks recorded."""

    def __init__(self) -> None:
        self.marked: list[int] = []

    async def claim(self, owner: str, limit: int, claim_ttl_s: float) -> list[OutboxMessage]:
        return []

    async def mark_published(self, owner: str, ids: Sequence[int]) -> None:
        self.marked += ids

    async def mark_failed(
        self, owner: str, failures: Sequence[tuple[int, str]], max_attempts: int
    ) -> None:
        raise AssertionError("no publish fails here")

    async def release(self, owner: str, ids: Sequence[int], delay_s: float) -> None:
        pass


class GatedPublisher:
    """JetStream whose acks arrive only once ``acks`` is set."""

    connected = True

    def __init__(self) -> None:
        self.acks = asyncio.Event()
        self.publishing: list[list[int]] = []

    async def publish_batch(self, messages: Sequence[OutboxMessage]) -> list[str | None]:
        self.publishing.append([m.id for m in messages])
        await self.acks.wait()
        return [None] * len(messages)


class Push:
    """Grants to waiting workers for the even ids (their grants mark them)."""

    def __init__(self) -> None:
        self.pushed: list[int] = []

    async def __call__(self, messages: Sequence[OutboxMessage], owner: str = OWNER) -> set[int]:
        used = {m.id for m in messages if m.id % 2 == 0}
        self.pushed += sorted(used)
        return used


def dispatcher_of(store: Store, publisher: GatedPublisher, batch_size: int) -> OutboxDispatcher:
    return OutboxDispatcher(
        store,  # type: ignore[arg-type]
        publisher,
        owner=OWNER,
        batch_size=batch_size,
        poll_interval_s=60,
        claim_ttl_s=30,
        max_attempts=3,
    )


async def test_a_push_waits_for_no_earlier_batch_s_acks_or_marks() -> None:
    store, publisher, push = Store(), GatedPublisher(), Push()
    dispatcher = dispatcher_of(store, publisher, batch_size=10)
    dispatcher.push_grants_with(push)
    running = asyncio.create_task(dispatcher.run())
    try:
        dispatcher.hand_over([message(1)])
        await eventually(lambda: publisher.publishing == [[1]], message="1 is not publishing")

        dispatcher.hand_over([message(2)])  # a worker waits: pushed at once
        await eventually(lambda: push.pushed == [2], message="2 waited for 1's acks")
        # a row to publish while a batch is in flight makes the next batch
        dispatcher.hand_over([message(3)])
        assert store.marked == []

        publisher.acks.set()
        await eventually(lambda: sorted(store.marked) == [1, 3], message="1 and 3 not marked")
        assert publisher.publishing == [[1], [3]]
    finally:
        dispatcher.stop()
        await asyncio.wait_for(running, 10)
    assert 2 not in store.marked  # its grant's statement marked it


async def test_a_full_batch_publishes_beside_the_one_in_flight() -> None:
    store, publisher = Store(), GatedPublisher()
    dispatcher = dispatcher_of(store, publisher, batch_size=2)
    running = asyncio.create_task(dispatcher.run())
    try:
        dispatcher.hand_over([message(1)])
        await eventually(lambda: publisher.publishing == [[1]], message="1 is not publishing")

        dispatcher.hand_over([message(3), message(5)])
        await eventually(
            lambda: publisher.publishing == [[1], [3, 5]], message="3 and 5 waited for 1's acks"
        )
        publisher.acks.set()
        await eventually(lambda: sorted(store.marked) == [1, 3, 5], message="not all marked")
    finally:
        dispatcher.stop()
        await asyncio.wait_for(running, 10)


async def test_a_stop_waits_for_the_batches_in_flight() -> None:
    store, publisher = Store(), GatedPublisher()
    dispatcher = dispatcher_of(store, publisher, batch_size=10)
    running = asyncio.create_task(dispatcher.run())
    dispatcher.hand_over([message(1)])
    await eventually(lambda: publisher.publishing == [[1]], message="1 is not publishing")

    dispatcher.stop()
    await asyncio.sleep(0)  # the loop sees the stop (a yield, not a wait for a condition)
    assert not running.done()  # 1's acks are awaited
    publisher.acks.set()
    await asyncio.wait_for(running, 10)
    assert store.marked == [1]
