"""Durable steps in the worker (worker_service/durable_steps.py): a step's function runs
once per job, its JSON result recorded before the job goes on; a later attempt gets the
recorded outcome back without a call; another step at a recorded position fails the job
NONDETERMINISTIC; a job error is recorded and raised again; a crash is not recorded."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shared.durable_steps import StepResult
from shared.errors import ErrorCode, ExecutionError, LeaseLost
from worker_service.attempt import Attempt
from worker_service.credentials import CredentialResolver
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.domain.model import CancelCause, LockedJob

from .fakes import FakeExecutor, locked


def attempt_for(job: LockedJob, executor: FakeExecutor) -> Attempt:
    return Attempt(job, credentials=CredentialResolver(executor), executor=executor)


class Effects:
    """An external system: every call with the key it was made under."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.calls: list[tuple[str, Any]] = []

    async def charge(self, amount: int) -> dict[str, Any]:
        self.calls.append((self.attempt.step_key, amount))
        return {"receipt": f"r-{amount}", "amounts": (amount,)}


async def test_a_step_runs_once_and_its_result_is_recorded_before_it_returns() -> None:
    executor = FakeExecutor()
    attempt = attempt_for(locked(), executor)
    effects = Effects(attempt)

    value = await attempt.step("charge", effects.charge, 5)
    assert await attempt.step("notify", lambda: "sent") == "sent"

    assert value == {"receipt": "r-5", "amounts": [5]}  # as recorded: through JSON
    assert effects.calls == [("job-1/0/charge", 5)]
    recorded = [step for _, _, step in executor.step_results]
    assert [(s.ordinal, s.name, s.result_json) for s in recorded] == [
        (0, "charge", '{"receipt": "r-5", "amounts": [5]}'),
        (1, "notify", '"sent"'),
    ]


async def test_a_later_attempt_gets_the_recorded_outcomes_without_calling() -> None:
    executor = FakeExecutor()
    recorded = (
        StepResult(0, "charge", result_json='{"receipt": "r-5"}', attempt=1),
        StepResult(1, "notify", error_code="JOB_REJECTED", error_message="bounced", attempt=1),
    )
    job = dataclasses.replace(locked(attempt=2), step_results=recorded)
    attempt = attempt_for(job, executor)
    effects = Effects(attempt)

    assert await attempt.step("charge", effects.charge, 5) == {"receipt": "r-5"}
    with pytest.raises(ExecutionError) as raised:
        await attempt.step("notify", effects.charge, 6)
    assert (raised.value.code, raised.value.detail) == ("JOB_REJECTED", "bounced")
    assert effects.calls == [] and executor.step_results == []


async def test_another_step_at_a_recorded_position_fails_nondeterministic() -> None:
    recorded = (StepResult(0, "charge", result_json="1", attempt=1),)
    job = dataclasses.replace(locked(attempt=2), step_results=recorded)
    attempt = attempt_for(job, FakeExecutor())
    effects = Effects(attempt)

    with pytest.raises(ExecutionError) as raised:
        await attempt.step("refund", effects.charge, 5)
    assert raised.value.code == ErrorCode.NONDETERMINISTIC
    assert "'refund'" in raised.value.detail and "'charge'" in raised.value.detail
    assert effects.calls == []


async def test_a_job_error_is_recorded_and_a_crash_is_not() -> None:
    executor = FakeExecutor()
    attempt = attempt_for(locked(), executor)

    def declined() -> None:
        raise ExecutionError("JOB_REJECTED", "declined")

    def crashed() -> None:
        raise ConnectionError("the payment service is down")

    with pytest.raises(ExecutionError):
        await attempt.step("charge", declined)
    with pytest.raises(ConnectionError):
        await attempt.step("notify", crashed)
    [(_, _, step)] = executor.step_results
    assert (step.ordinal, step.error_code, step.error_message) == (0, "JOB_REJECTED", "declined")


async def test_a_result_json_cannot_hold_fails_the_attempt_unrecorded() -> None:
    executor = FakeExecutor()
    attempt = attempt_for(locked(), executor)
    with pytest.raises(ExecutionError) as raised:
        await attempt.step("charge", lambda: {1, 2})
    assert raised.value.code == ErrorCode.INTERNAL_ERROR
    assert executor.step_results == []


async def test_an_earlier_record_at_the_position_wins() -> None:
    """A record that timed out but was stored: asked again, the job service answers what it
    stored, and the attempt goes on with that."""
    executor = FakeExecutor()
    stored = StepResult(0, "charge", result_json='"first"', attempt=1)
    executor.step_result_answers = [ExecutorUnreachable("timed out"), (False, stored)]
    attempt = attempt_for(locked(), executor)
    assert await attempt.step("charge", lambda: "second") == "first"
    assert len(executor.step_results) == 2


async def test_a_lost_lease_while_recording_stops_the_attempt() -> None:
    executor = FakeExecutor()
    executor.step_result_answers = [LeaseLost("the lease on this job is no longer held")]
    attempt = attempt_for(locked(), executor)
    with pytest.raises(LeaseLost):
        await attempt.step("charge", lambda: 1)
    assert attempt.cause is CancelCause.LEASE_LOST


async def test_step_key_outside_a_step_and_a_step_inside_a_step_are_refused() -> None:
    attempt = attempt_for(locked(), FakeExecutor())
    with pytest.raises(RuntimeError):
        _ = attempt.step_key

    async def nested() -> Any:
        return await attempt.step("inner", lambda: 1)

    with pytest.raises(RuntimeError):
        await attempt.step("outer", nested)
    with pytest.raises(ValueError):
        await attempt.step("Not A Name", lambda: 1)


async def test_a_lease_run_out_by_the_local_clock_runs_no_step() -> None:
    """A worker paused past its lease (chaos long seed 9989: SIGSTOP for 4 s) resumes with
    another attempt owning the job, which may have made and recorded the step: the stale
    attempt must not call the function again."""
    executor = FakeExecutor()
    attempt = attempt_for(locked(), executor)
    effects = Effects(attempt)
    expired = False
    attempt.watch_lease(lambda: expired)
    await attempt.step("reserve", effects.charge, 1)

    expired = True
    with pytest.raises(LeaseLost):
        await attempt.step("charge", effects.charge, 2)
    assert effects.calls == [("job-1/0/reserve", 1)]
    assert attempt.cause is CancelCause.LEASE_LOST
    assert len(executor.step_results) == 1
