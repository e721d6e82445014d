"""The worker's side of rate limits at the call (worker_service/call_permits.py): it waits
as long as the job service says, passes a reserved slot back when it is due, asks again
for a permit that arrived after its validity, stops asking about an unlimited tier for a
while, and reports a 429 for the tier of the call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from shared.errors import ErrorCode, ExecutionError, LeaseLost
from worker_service.call_permits import CallPermits
from worker_service.domain.model import CallPermit


class Answers:
    """An executor that answers AcquireCallPermit from a script, recording the asks."""

    def __init__(self, answers: Sequence[CallPermit | Exception], delay_s: float = 0.0) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str]] = []  # (tier, reserved slot)
        self.reports: list[tuple[str, float]] = []
        self.delay_s = delay_s

    async def acquire_call_permit(
        self, job_id: str, lease_token: str, tier: str, reserved_slot: str, *, timeout_s: float
    ) -> CallPermit:
        self.asked.append((tier, reserved_slot))
        await asyncio.sleep(self.delay_s)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def report_rate_limited(
        self, job_id: str, lease_token: str, tier: str, retry_after_s: float, *, timeout_s: float
    ) -> None:
        self.reports.append((tier, retry_after_s))


GRANTED = CallPermit(granted=True, retry_after_s=0, valid_for_s=0.2, unlimited=False)


async def test_a_reserved_slot_is_waited_for_and_passed_back() -> None:
    executor = Answers(
        [
            CallPermit(
                granted=False,
                retry_after_s=0.05,
                valid_for_s=0.2,
                unlimited=False,
                reserved_slot="1796189271000000",
            ),
            GRANTED,
        ]
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    await CallPermits(executor).acquire("primary", "job", "lease")  # type: ignore[arg-type]
    assert executor.asked == [("primary", ""), ("primary", "1796189271000000")]
    assert loop.time() - started >= 0.05


async def test_a_permit_that_arrives_after_its_validity_is_asked_for_again() -> None:
    late = CallPermit(granted=True, retry_after_s=0, valid_for_s=0.001, unlimited=False)
    executor = Answers([late, GRANTED], delay_s=0.01)
    await CallPermits(executor).acquire("primary", "job", "lease")  # type: ignore[arg-type]
    assert executor.asked == [("primary", ""), ("primary", "")]


async def test_an_unlimited_tier_is_not_asked_about_again_for_a_while() -> None:
    unlimited = CallPermit(granted=True, retry_after_s=0, valid_for_s=30, unlimited=True)
    executor = Answers([unlimited])
    permits = CallPermits(executor)  # type: ignore[arg-type]
    for _ in range(3):
        await permits.acquire("cheap", "job", "lease")
    assert executor.asked == [("cheap", "")]


async def test_a_lost_lease_ends_the_wait() -> None:
    executor = Answers([LeaseLost("the lease is no longer held")])
    with pytest.raises(LeaseLost):
        await CallPermits(executor).acquire("primary", "job", "lease")  # type: ignore[arg-type]


async def test_a_429_is_reported_for_the_tier_of_the_call_and_other_failures_are_not() -> None:
    executor = Answers([])
    permits = CallPermits(executor)  # type: ignore[arg-type]
    error = ExecutionError(ErrorCode.PROVIDER_RATE_LIMITED, "429", {}, 7.5)
    await permits.rate_limited("cheap", "job", "lease", error)
    await permits.rate_limited(
        "primary", "job", "lease", ExecutionError(ErrorCode.PROVIDER_TIMEOUT, "slow")
    )
    assert executor.reports == [("cheap", 7.5)]


async def test_a_granted_slot_is_waited_for_by_the_wall_clock_and_refused_past_its_slack() -> None:
    soon = time.time() + 0.05
    past = time.time() - 1.0  # a slot whose slack ran out before the answer arrived
    executor = Answers(
        [
            CallPermit(
                granted=True, retry_after_s=0, valid_for_s=0.2, unlimited=False, slot_at=past
            ),
            CallPermit(
                granted=True, retry_after_s=0, valid_for_s=0.2, unlimited=False, slot_at=soon
            ),
        ]
    )
    await CallPermits(executor).acquire("primary", "job", "lease")  # type: ignore[arg-type]
    assert len(executor.asked) == 2
    assert soon <= time.time() <= soon + 0.2
