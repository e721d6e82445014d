"""AI jobs driven by hand: inputs of the reference types, and results built exactly as a
worker builds them (the real definition, prompt, fake provider, validation, projection and
wire encoding), for tests that play the worker against ExecutorService."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from shared.ai.prompts import RenderedPrompt
from shared.ai.provider import ProviderRequest, ProviderResponse, UsageRecord
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pbconv import dict_from_struct
from shared.registry import default_registry
from worker_service.adapters.fake_provider import FakeProvider
from worker_service.adapters.grpc_executor import result_message
from worker_service.domain.model import ResultSubmission
from worker_service.domain.outcomes import succeeded

FEYNMAN_INPUT: dict[str, Any] = {
    "knowledge_item_id": "ki-42",
    "knowledge_base_id": "kb-7",
    "title": "Photosynthesis",
    "content": (
        "Plants convert light energy, water and carbon dioxide into glucose and oxygen "
        "inside chloroplasts; chlorophyll absorbs the light."
    ),
    "explanation": "Plants take light and water and make glucose.",
}

USAGE = UsageRecord(
    provider="fake",
    model="fake-primary",
    credential_mode="platform",
    input_tokens=120,
    output_tokens=40,
    cost_usd=0.0012,
    latency_ms=15,
)

REGISTRY = default_registry()


class HandContext:
    """An ExecutionContext on the fake provider, for one locked job."""

    def __init__(self, locked: epb.LockedJob, provider: FakeProvider | None = None) -> None:
        self._locked = locked
        self._provider = provider or FakeProvider()

    @property
    def job_id(self) -> str:
        return self._locked.job_id

    @property
    def attempt(self) -> int:
        return self._locked.attempt

    @property
    def user_id(self) -> str:
        return self._locked.user_id

    @property
    def prompt(self) -> tuple[str, str]:
        return self._locked.prompt_key, self._locked.prompt_version

    def report_progress(self, fraction: float) -> None:
        return None

    async def generate(
        self, tier: str, prompt: RenderedPrompt, *, step: str = ""
    ) -> ProviderResponse:
        return await self._provider.generate(
            ProviderRequest(
                model=f"fake-{tier}",
                messages=prompt.messages,
                prompt_key=prompt.key,
                prompt_version=prompt.version,
                variables=prompt.variables,
            )
        )


async def worker_result(
    locked: epb.LockedJob, usage: Sequence[UsageRecord] = (USAGE,)
) -> epb.SubmitResultRequest:
    """The SubmitResult a worker sends for ``locked``: output, hash, projection, usage."""
    definition = REGISTRY.get(locked.job_type)
    job_input = definition.input_model.model_validate(dict_from_struct(locked.input))
    result = await definition.execute(job_input, HandContext(locked))
    outcome = dataclasses.replace(succeeded(definition, result), usage=tuple(usage))
    return result_message(ResultSubmission(locked.job_id, locked.lease_token, outcome))


async def feynman_flow(
    client: Any, timeout: float = 30.0, job_id: str | None = None
) -> tuple[Any, Any]:
    """Creates a feynman_evaluation through ``client`` (tests.support.stack.Client) — or
    takes ``job_id``, created already — and waits until it and its review-card child
    finished; returns both job views."""
    from shared.pb.jobs.v1 import job_pb2
    from tests.support.wait import eventually

    terminal = (
        job_pb2.JOB_STATUS_SUCCEEDED,
        job_pb2.JOB_STATUS_FAILED,
        job_pb2.JOB_STATUS_CANCELLED,
    )
    if job_id is None:
        job_id = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job.id

    async def finished(job_id: str) -> Any:
        job = await client.get(job_id)
        return job if job.status in terminal else None

    parent = await eventually(
        lambda: finished(job_id), timeout=timeout, message="the parent did not finish"
    )
    assert parent.status == job_pb2.JOB_STATUS_SUCCEEDED, parent.error_code
    [child_id] = parent.child_job_ids
    child = await eventually(
        lambda: finished(child_id), timeout=timeout, message="the child did not finish"
    )
    return parent, child


def review_cards(job: Any) -> list[Any]:
    return [a for a in job.artifacts if a.artifact_type == "review_card"]
