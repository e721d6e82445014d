"""Checkpointed provider calls (issue 19): a worker records each provider call's response
as a named step of the job, fenced by its lease, before its attempt goes on; the next
attempt of the job receives the recorded steps with its lease (the claims use case attaches
them) and reuses them instead of paying for the calls again. Responses are the job's
data: never logged, deleted with it; the response of a job type whose output is redacted
is never recorded (``shared.redaction``: refused here, whatever the worker does)."""

from __future__ import annotations

import json

from job_service import metrics
from job_service.domain.checks import require_uuid
from job_service.domain.declared_types import JobTypes
from job_service.ports.steps import StepStore
from job_service.usecases.sealing import Sealer
from job_service.usecases.step_results import StepResults
from shared import redaction
from shared.ai.provider import UsageRecord
from shared.ai.steps import MAX_RESPONSE_CHARS, STEP_NAME, StepResponse
from shared.errors import FieldViolation, InvalidInput, LeaseLost


class Steps:
    def __init__(self, store: StepStore, registry: JobTypes, sealer: Sealer | None = None) -> None:
        """``sealer``: seals each response under its job's user's key (None: as it is)."""
        self._sealer = sealer or Sealer(None, None)
        self._store = store
        self._registry = registry
        # the durable steps' outcomes (RecordStepResult), on the same store
        self.results = StepResults(store, self._sealer)

    async def record(
        self,
        job_id: str,
        lease_token: str,
        step: str,
        response: StepResponse,
        usage: UsageRecord,
    ) -> int:
        """The attempt the step was recorded under; LeaseLost unless ``lease_token`` holds
        the job's lease; InvalidInput for a job whose type redacts its output."""
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
        # most deployments redact nothing: then no job is looked up for its type
        if self._registry.derived("redacting", lambda t: any(map(redaction.redacts, t))):
            await self._refuse_redacted(job_id)
        if self._sealer.enabled:
            owner = await self._store.owner(job_id)
            if owner is None:
                raise LeaseLost("the lease on this job is no longer held")
            response = await self._sealer.sealed_step(owner, job_id, step, response)
        try:
            return await self._store.record_step(job_id, lease_token, step, response, usage)
        except LeaseLost:
            metrics.stale_submit("RecordStep")
            raise

    async def _refuse_redacted(self, job_id: str) -> None:
        """InvalidInput when the job's type redacts its output: a step's response is the
        whole answer, redacted fields included (no such job: the store answers LeaseLost)."""
        job_type = await self._store.job_type(job_id)
        if job_type is None:
            return
        if not redaction.records_steps(redaction.definition_of(self._registry, job_type)):
            raise InvalidInput(
                "the step cannot be recorded: the job's type redacts its output, and a "
                "step's response would store the redacted fields",
                [FieldViolation("job_id", "a job whose type redacts no output field")],
            )
