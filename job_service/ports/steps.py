"""What the checkpoint use cases need: a job's recorded steps (``job_steps``) and its
durable steps' outcomes (``job_step_results``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shared.ai.provider import UsageRecord
from shared.ai.steps import RecordedStep, StepResponse
from shared.durable_steps import StepResult


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

    async def record_step_result(
        self, job_id: str, lease_token: str, step: StepResult
    ) -> tuple[bool, StepResult | None]:
        """Stores a durable step's outcome at its ordinal unless one is stored there
        already, while ``lease_token`` holds the job's lease (else LeaseLost): (True, the
        step as recorded) or (False, the stored one; None when a concurrent call stored it
        after this one looked)."""
        ...

    async def step_results_of(self, job_ids: Sequence[str]) -> dict[str, list[StepResult]]:
        """The durable steps' outcomes of each job that has any, by ordinal."""
        ...

    async def job_type(self, job_id: str) -> str | None:
        """The stored type of the job, or None when there is no such job."""
        ...

    async def owner(self, job_id: str) -> str | None:
        """The user whose job it is (its steps are sealed under their key), or None."""
        ...

    async def steps_of(self, job_ids: Sequence[str]) -> dict[str, list[RecordedStep]]:
        """The recorded steps of each job that has any, oldest first."""
        ...
