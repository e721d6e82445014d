"""What the checkpoint use cases need: a job's recorded steps (``job_steps``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shared.ai.provider import UsageRecord
from shared.ai.steps import RecordedStep, StepResponse


class StepStore(Protocol):
    async def record_step(
        self,
        job_id: str,
        lease_token: str,
        step: str,
        response: StepResponse,
        usage: UsageRecord,
    ) -> int:
        """Stores (or replaces) the step's response with the call's usage row, while
        ``lease_token`` holds the job's lease; the attempt number, or LeaseLost."""
        ...

    async def job_type(self, job_id: str) -> str | None:
        """The stored type of the job, or None when there is no such job."""
        ...

    async def steps_of(self, job_ids: Sequence[str]) -> dict[str, list[RecordedStep]]:
        """The recorded steps of each job that has any, oldest first."""
        ...
