"""Checkpointed provider calls (issue 19): a worker records each provider call's response
as a named step of the job, fenced by its lease, before its attempt goes on; the next
attempt of the job receives the recorded steps with its lease (the claims use case attaches
them) and reuses them instead of paying for the calls again. Responses are the job's
data: never logged, deleted with it."""

from __future__ import annotations

import json

from job_service import metrics
from job_service.domain.checks import require_uuid
from job_service.ports.steps import StepStore
from shared.ai.provider import UsageRecord
from shared.ai.steps import MAX_RESPONSE_CHARS, STEP_NAME, StepResponse
from shared.errors import FieldViolation, InvalidInput, LeaseLost


class Steps:
    def __init__(self, store: StepStore) -> None:
        self._store = store

    async def record(
        self,
        job_id: str,
        lease_token: str,
        step: str,
        response: StepResponse,
        usage: UsageRecord,
    ) -> int:
        """The attempt the step was recorded under; LeaseLost unless ``lease_token`` holds
        the job's lease."""
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        violations = []
        if not STEP_NAME.fullmatch(step):
            violations.append(
                FieldViolation("step", "1..64 of a-z, 0-9 and _, starting with a letter")
            )
        if not response.text:
            violations.append(FieldViolation("response.text", "the provider's answer"))
        elif len(response.text) > MAX_RESPONSE_CHARS or "\x00" in response.text:
            violations.append(
                FieldViolation("response.text", f"at most {MAX_RESPONSE_CHARS} characters, no NUL")
            )
        if response.parsed is not None and "\\u0000" in json.dumps(response.parsed):
            violations.append(FieldViolation("response.parsed_json", "no NUL character"))
        if not usage.call_id:
            violations.append(FieldViolation("usage.call_id", "the worker's id of the call"))
        elif usage.reused or usage.error_code:
            violations.append(
                FieldViolation("usage", "the usage of a call that answered (not reused)")
            )
        if violations:
            raise InvalidInput("the step cannot be recorded", violations)
        try:
            return await self._store.record_step(job_id, lease_token, step, response, usage)
        except LeaseLost:
            metrics.stale_submit("RecordStep")
            raise
