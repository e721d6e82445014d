"""Durable sleeps and signal waits in the worker (worker_service/waits.py): a sleep ahead
suspends the attempt (SUSPENDED_SLEEP, the wake time as retry_after) after recording the
wake time; a replay past it goes on; a signal wait records what ended it, so a replay
returns that and hands the signal to no later wait; a wait with no signal yet suspends
(SUSPENDED_SIGNAL) with the newest seq it saw; a recorded wait for another name is
NONDETERMINISTIC."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime

import pytest

from shared.durable_steps import StepResult
from shared.errors import ErrorCode, ExecutionError
from worker_service.attempt import Attempt
from worker_service.credentials import CredentialResolver
from worker_service.domain.model import LockedJob, Signal, SignalWait
from worker_service.domain.outcomes import failure_for

from .fakes import FakeExecutor, locked


def attempt_for(job: LockedJob, executor: FakeExecutor) -> Attempt:
    return Attempt(job, credentials=CredentialResolver(executor), executor=executor)


def sent(seq: int, name: str, **payload: object) -> Signal:
    return Signal(seq, name, dict(payload), datetime.now(UTC))


def replaying(*results: StepResult) -> LockedJob:
    return dataclasses.replace(locked(), step_results=results)


async def test_a_sleep_records_its_wake_time_and_suspends_the_attempt() -> None:
    executor = FakeExecutor()
    attempt = attempt_for(locked(), executor)
    before = time.time()
    with pytest.raises(ExecutionError) as raised:
        await attempt.sleep(30)
    failure = failure_for(raised.value)
    assert failure.code == ErrorCode.SUSPENDED_SLEEP
    assert failure.retry_after_s is not None and 29 < failure.retry_after_s <= 30
    [(_, _, step)] = executor.step_results
    assert step.name == "sleep" and before + 30 <= float(step.result_json or 0) <= time.time() + 30


async def test_a_replay_past_the_recorded_wake_time_goes_on() -> None:
    executor = FakeExecutor()
    past = StepResult(0, "sleep", result_json=json.dumps(time.time() - 1), attempt=1)
    attempt = attempt_for(replaying(past), executor)
    await attempt.sleep(3600)  # the recorded time counts, not this call's
    assert executor.step_results == []


async def test_a_wait_with_no_signal_suspends_with_the_newest_seq_it_saw() -> None:
    executor = FakeExecutor(signals={"job-1": [sent(1, "other")]})
    attempt = attempt_for(locked(), executor)
    with pytest.raises(SignalWait) as raised:
        await attempt.wait_for_signal("approve", timeout=60)
    failure = failure_for(raised.value)
    assert (failure.code, failure.signals_seen) == (ErrorCode.SUSPENDED_SIGNAL, 1)
    # only the timeout's time is recorded: what ends the wait is recorded when it comes
    assert [s.name for _, _, s in executor.step_results] == ["signal_wait"]


async def test_a_recorded_wait_returns_its_signal_and_later_waits_get_the_next() -> None:
    executor = FakeExecutor(signals={"job-1": [sent(1, "approve", n=1), sent(2, "approve", n=2)]})
    until = json.dumps(time.time() + 60)
    recorded = (
        StepResult(0, "signal_wait", result_json=until, attempt=1),
        StepResult(
            1,
            "signal",
            result_json=json.dumps({"name": "approve", "seq": 1, "payload": {"n": 1}}),
            attempt=1,
        ),
    )
    attempt = attempt_for(replaying(*recorded), executor)
    assert await attempt.wait_for_signal("approve", timeout=60) == {"n": 1}
    assert await attempt.wait_for_signal("approve", timeout=60) == {"n": 2}  # not seq 1 again


async def test_a_recorded_timeout_returns_none_and_another_name_is_nondeterministic() -> None:
    until = json.dumps(time.time() - 1)
    timed_out = (
        StepResult(0, "signal_wait", result_json=until, attempt=1),
        StepResult(1, "signal", result_json='{"name": "approve", "timed_out": true}', attempt=1),
    )
    attempt = attempt_for(replaying(*timed_out), FakeExecutor())
    assert await attempt.wait_for_signal("approve", timeout=60) is None

    attempt = attempt_for(replaying(*timed_out), FakeExecutor())
    with pytest.raises(ExecutionError) as raised:
        await attempt.wait_for_signal("reject", timeout=60)
    assert raised.value.code == ErrorCode.NONDETERMINISTIC
