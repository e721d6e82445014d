"""Checkpointed provider calls in the worker (worker_service/steps.py): a named step's
response is recorded (RecordStep) before the call returns to the job; a step an earlier
attempt recorded is answered once without a call and billed as reused; a refused record
(lease lost) stops the attempt; a job service out of reach leaves the step unrecorded and
the attempt going."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from jobtypes import feynman_evaluation as feynman
from jobtypes.feynman_evaluation import PROMPT as FEYNMAN_PROMPT
from shared.ai.provider import ModelTier
from shared.ai.steps import RecordedStep, StepResponse
from shared.errors import LeaseLost
from tests.support.ai import FEYNMAN_INPUT
from worker_service.adapters.fake_provider import FakeProvider
from worker_service.attempt import Attempt
from worker_service.credentials import CredentialResolver
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.domain.model import CancelCause, LockedJob
from worker_service.gateway import ModelGateway
from worker_service.model_router import ModelRouter, PriceTable, Route
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher
from worker_service.steps import Checkpoints

from .fakes import FakeExecutor, locked

PROMPT = FEYNMAN_PROMPT.render(
    {"title": "t", "content": "Entropy measures disorder.", "explanation": "disorder"}
)
RECORDED = RecordedStep(
    step="answer",
    response=StepResponse('{"score": 1}', {"score": 1}, "fake-primary", 40, 9, "fake"),
    attempt=1,
    call_id="call-1",
)


def attempt_for(job: LockedJob, executor: FakeExecutor, provider: FakeProvider) -> Attempt:
    router = ModelRouter(
        {tier: Route(provider, f"fake-{tier.value}") for tier in ModelTier},
        PriceTable({"fake-primary": (1.0, 1.0)}),
    )
    ticks = itertools.count(step=1.0)  # every look at the clock is a second later
    return Attempt(
        job,
        credentials=CredentialResolver(executor),
        gateway=ModelGateway(router),
        checkpoints=Checkpoints(job, executor, clock=lambda: float(next(ticks))),
    )


async def test_a_named_call_is_recorded_with_its_usage_before_it_returns() -> None:
    executor, provider = FakeExecutor(), FakeProvider()
    attempt = attempt_for(locked(), executor, provider)

    response = await attempt.generate(ModelTier.PRIMARY, PROMPT, step="answer")

    [(job_id, token, step, recorded, usage)] = executor.recorded_steps
    assert (job_id, token, step) == ("job-1", "token-job-1-1", "answer")
    assert (recorded.text, recorded.parsed, recorded.provider) == (
        response.text,
        response.parsed,
        "fake",
    )
    assert usage == attempt.usage[0] and usage.cost_usd > 0 and not usage.reused
    assert provider.calls == 1


async def test_an_unnamed_call_is_not_recorded() -> None:
    executor = FakeExecutor()
    attempt = attempt_for(locked(), executor, FakeProvider())

    await attempt.generate(ModelTier.PRIMARY, PROMPT)

    assert executor.recorded_steps == []


async def test_a_recorded_step_is_answered_once_without_a_call_and_billed_as_reused() -> None:
    executor, provider = FakeExecutor(), FakeProvider()
    job = dataclasses.replace(locked(attempt=2), recorded_steps=(RECORDED,))
    attempt = attempt_for(job, executor, provider)

    reused = await attempt.generate(ModelTier.PRIMARY, PROMPT, step="answer")

    assert (reused.text, reused.parsed, provider.calls) == ('{"score": 1}', {"score": 1}, 0)
    [usage] = attempt.usage
    assert usage.reused and (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (0, 0, 0)
    assert (usage.provider, usage.model) == ("fake", "fake-primary") and usage.call_id
    assert executor.recorded_steps == []  # nothing new to record

    # the same step again (a repair after the answer failed validation) calls the provider
    await attempt.generate(ModelTier.PRIMARY, PROMPT, step="answer")
    assert provider.calls == 1 and [s[2] for s in executor.recorded_steps] == ["answer"]


async def test_a_record_refused_for_the_lease_stops_the_attempt() -> None:
    executor = FakeExecutor(step_answers=[LeaseLost("gone")])
    attempt = attempt_for(locked(), executor, FakeProvider())

    with pytest.raises(LeaseLost):
        await attempt.generate(ModelTier.PRIMARY, PROMPT, step="answer")

    assert attempt.cause is CancelCause.LEASE_LOST
    assert len(attempt.usage) == 1  # the call is billed all the same


async def test_a_record_that_cannot_get_through_leaves_the_step_unrecorded_and_goes_on() -> None:
    executor = FakeExecutor(step_answers=[ExecutorUnreachable("down")] * 50)
    attempt = attempt_for(locked(ttl_ms=5000), executor, FakeProvider())

    response = await attempt.generate(ModelTier.PRIMARY, PROMPT, step="answer")

    assert response.parsed is not None and attempt.cause is None
    assert 1 < len(executor.recorded_steps) < 50  # retried within the window, then gave up


async def test_a_transient_failure_to_record_is_retried() -> None:
    executor = FakeExecutor(step_answers=[ExecutorUnreachable("blip"), 1])
    attempt = attempt_for(locked(), executor, FakeProvider())

    await attempt.generate(ModelTier.PRIMARY, PROMPT, step="answer")

    assert len(executor.recorded_steps) == 2


@pytest.mark.parametrize("redacted", [frozenset(), frozenset({"summary"})])
async def test_a_job_type_whose_output_is_redacted_is_not_checkpointed(
    redacted: frozenset[str],
) -> None:
    """Its response carries the fields the job service must never store."""
    definition = dataclasses.replace(feynman.DEFINITION, output_redaction=redacted)
    executor, provider = FakeExecutor(), FakeProvider()
    router = ModelRouter(
        {tier: Route(provider, f"fake-{tier.value}") for tier in ModelTier}, PriceTable({})
    )
    job = locked(job_type=definition.job_type, **FEYNMAN_INPUT)
    async with ResultBatcher(executor) as batcher:
        pipeline = Pipeline(
            executor, batcher, {job.job_type: definition}.__getitem__, gateway=ModelGateway(router)
        )
        await pipeline.run(job)

    assert [r["job_id"] for r in executor.results] == [job.job_id]
    assert len(executor.recorded_steps) == (0 if redacted else 1)
