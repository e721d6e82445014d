"""The job service's side of pushed grants (ADR 0009), as pure logic: which dispatch rows a
push (``Grants.push``) uses, how much room a waiting worker has (its report less the grants
pushed since it counted), and what happens to grants a session can no longer take. The
claim, the leases and the steps are fakes here; tests/e2e/test_grants_ahead.py runs the
real thing."""

from __future__ import annotations

import time
from typing import cast

from job_service.domain.grants import LockGrant
from job_service.domain.outbox import DispatchMark, OutboxMessage
from job_service.ports.steps import StepStore
from job_service.usecases.claims import Claims
from job_service.usecases.grants import Grants
from job_service.usecases.leases import Leases
from job_service.usecases.waiting_workers import REPORT_STALE_S, WaitingWorker, WaitingWorkers
from tests.support.fakes import FakeClaims, FakeLeases

Q = "ai-interactive"
OWNER = "dispatcher-1"


def dispatches(n: int, queue: str = Q, first_id: int = 1) -> list[OutboxMessage]:
    return [
        OutboxMessage(i, f"jobs.dispatch.{queue}", f"k{i}", {}, 0)
        for i in range(first_id, first_id + n)
    ]


class Pusher:
    """The sessions' side (``WaitingWorkers``) and the dispatcher's (``Grants.push``)."""

    def __init__(self, grants: Grants, waiting: WaitingWorkers) -> None:
        self._grants = grants
        self.waiting = waiting
        self.open, self.report, self.close = waiting.open, waiting.report, waiting.close

    async def push(self, messages: list[OutboxMessage]) -> set[int]:
        return await self._grants.push(messages, OWNER)


def pusher(eligible: int) -> tuple[Pusher, FakeClaims, FakeLeases]:
    claims, leases, waiting = FakeClaims(eligible), FakeLeases(), WaitingWorkers()
    # no grant of these fakes saw recorded steps: the step store is never asked
    grants = Grants(cast(Claims, claims), cast(Leases, leases), cast(StepStore, None), waiting)
    return Pusher(grants, waiting), claims, leases


class Session:
    def __init__(self, live: bool = True) -> None:
        self.live = live
        self.sent: list[LockGrant] = []

    def deliver(self, grants: list[LockGrant]) -> bool:
        if self.live:
            self.sent += grants
        return self.live


async def test_a_worker_that_reports_no_slots_is_pushed_nothing() -> None:
    push, claims, _ = pusher(eligible=5)
    session = Session()
    push.open(1, "w1", [], session.deliver)

    assert await push.push(dispatches(3)) == set()
    assert claims.claims == [] and session.sent == []


async def test_grants_go_to_the_free_slots_and_use_one_row_each() -> None:
    push, claims, _ = pusher(eligible=5)
    session = Session()
    push.open(1, "w1", ["synthetic@1.0.0"], session.deliver)
    push.report(1, {Q: 2}, taken=0)

    used = await push.push(dispatches(3))

    assert len(session.sent) == 2
    assert used == {1, 2}  # the third row is published
    assert claims.claims == [(Q, 2, "w1")]
    # the grant's statement marks the rows it uses, as many as it grants, in order
    assert claims.marks == [DispatchMark(OWNER, (1, 2))]


async def test_rows_of_other_subjects_and_queues_are_left_alone() -> None:
    push, _, _ = pusher(eligible=5)
    session = Session()
    push.open(1, "w1", [], session.deliver)
    push.report(1, {Q: 4}, taken=0)
    event = OutboxMessage(9, "jobs.events.synthetic.succeeded", "e9", {}, 0)

    used = await push.push([event, *dispatches(1, "ai-background", first_id=5)])

    assert used == set() and session.sent == []


async def test_a_stale_report_never_makes_room_for_grants_not_yet_taken() -> None:
    push, _, _ = pusher(eligible=10)
    session = Session()
    push.open(1, "w1", [], session.deliver)
    push.report(1, {Q: 2}, taken=0)
    await push.push(dispatches(2))  # two pushed, the worker has not said it took them

    # a report the worker counted before it read the two: still 2 free, 0 taken
    push.report(1, {Q: 2}, taken=0)
    assert await push.push(dispatches(2, first_id=3)) == set()

    # it took them, and one of them finished: 1 free
    push.report(1, {Q: 1}, taken=2)
    assert await push.push(dispatches(2, first_id=5)) == {5}
    assert len(session.sent) == 3


def test_room_counts_the_unconfirmed_grants_of_its_own_queue_only() -> None:
    worker = WaitingWorker(1, "w1", None, Session().deliver)
    worker.report({Q: 3, "ai-background": 2}, taken=0)
    worker.pushed(Q, 2)

    assert worker.room(Q) == 1
    assert worker.room("ai-background") == 2
    worker.report({Q: 1, "ai-background": 2}, taken=2)
    assert worker.room(Q) == 1


async def test_the_worker_with_the_most_room_is_pushed_first() -> None:
    push, claims, _ = pusher(eligible=10)
    small, large = Session(), Session()
    push.open(1, "small", [], small.deliver)
    push.open(2, "large", [], large.deliver)
    push.report(1, {Q: 1}, taken=0)
    push.report(2, {Q: 3}, taken=0)

    await push.push(dispatches(4))

    assert [c[2] for c in claims.claims] == ["large", "small"]
    assert (len(large.sent), len(small.sent)) == (3, 1)


async def test_a_claim_that_grants_less_than_asked_ends_the_queue() -> None:
    push, claims, _ = pusher(eligible=1)
    session = Session()
    push.open(1, "w1", [], session.deliver)
    push.report(1, {Q: 4}, taken=0)

    assert await push.push(dispatches(4)) == {1}
    assert len(claims.claims) == 1


async def test_grants_for_a_session_that_ended_are_handed_back_and_it_is_forgotten() -> None:
    push, claims, leases = pusher(eligible=10)
    gone = Session(live=False)
    push.open(1, "w1", [], gone.deliver)
    push.report(1, {Q: 2}, taken=0)

    used = await push.push(dispatches(2))

    assert leases.handed_back == [("job-0", "WORKER_SHUTDOWN"), ("job-1", "WORKER_SHUTDOWN")]
    assert used == {1, 2}  # the hand-back makes the jobs due again, with rows of their own
    assert await push.push(dispatches(2, first_id=3)) == set()
    assert len(claims.claims) == 1


async def test_a_closed_session_is_pushed_nothing() -> None:
    push, claims, _ = pusher(eligible=10)
    session = Session()
    push.open(1, "w1", [], session.deliver)
    push.report(1, {Q: 2}, taken=0)
    push.close(1)

    assert await push.push(dispatches(2)) == set()
    assert claims.claims == []


async def test_a_worker_not_heard_from_lately_is_pushed_nothing_until_it_reports() -> None:
    push, claims, _ = pusher(eligible=10)
    session = Session()
    push.open(1, "w1", [], session.deliver)
    push.report(1, {Q: 2}, taken=0)
    push.waiting._waiting[1].heard_at = time.monotonic() - REPORT_STALE_S - 0.1  # frozen since

    assert await push.push(dispatches(2)) == set()
    assert claims.claims == []

    push.report(1, {Q: 2}, taken=0)  # it lives again
    assert await push.push(dispatches(2)) == {1, 2}
