"""Durable steps (issue 45, ADR 0013): a worker records the outcome of each ``ctx.step`` of
an attempt — a side effect's result, or the job error it raised — at the step's position
in the job's code (its ordinal), fenced by its lease, before the attempt goes on; the next
attempt of the job receives the outcomes with its lease (the grants use case attaches
them) and returns them instead of running the steps again. The first outcome recorded at
an ordinal stays. Outcomes are the job's data: sealed at rest, never logged."""

from __future__ import annotations

import json

from job_service import metrics
from job_service.domain.checks import require_uuid
from job_service.ports.steps import StepStore
from job_service.usecases.sealing import Sealer
from shared.durable_steps import (
    ERROR_CODE,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_ORDINAL,
    MAX_RESULT_CHARS,
    STEP_NAME,
    StepResult,
)
from shared.errors import FieldViolation, InvalidInput, LeaseLost


class StepResults:
    def __init__(self, store: StepStore, sealer: Sealer | None = None) -> None:
        """``sealer``: seals each outcome under its job's user's key (None: as it is)."""
        self._store = store
        self._sealer = sealer or Sealer(None, None)

    async def record(
        self, job_id: str, lease_token: str, step: StepResult
    ) -> tuple[bool, StepResult | None]:
        """(True, the step as recorded) or (False, the outcome an earlier call recorded at
        its ordinal; None when a concurrent call's is not visible yet); LeaseLost unless
        ``lease_token`` holds the job's lease; InvalidInput for a malformed step."""
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        violations = _violations(step)
        if violations:
            raise InvalidInput("the step's outcome cannot be recorded", violations)
        owner = None
        if self._sealer.enabled:
            owner = await self._store.owner(job_id)
            if owner is None:
                raise LeaseLost("the lease on this job is no longer held")
            step = await self._sealer.sealed_step_result(owner, job_id, step)
        try:
            recorded, stored = await self._store.record_step_result(job_id, lease_token, step)
        except LeaseLost:
            metrics.stale_submit("RecordStepResult")
            raise
        if stored is not None and owner is not None:
            stored = await self._sealer.opened_step_result(owner, job_id, stored)
        return recorded, stored


def _violations(step: StepResult) -> list[FieldViolation]:
    violations = []
    if not 0 <= step.ordinal <= MAX_ORDINAL:
        violations.append(FieldViolation("ordinal", f"0..{MAX_ORDINAL}"))
    if not STEP_NAME.fullmatch(step.name):
        violations.append(FieldViolation("name", "1..64 of a-z, 0-9 and _, starting with a letter"))
    if step.result_json is not None:
        if len(step.result_json) > MAX_RESULT_CHARS or not _is_json(step.result_json):
            violations.append(
                FieldViolation(
                    "outcome.result_json", f"a JSON value, at most {MAX_RESULT_CHARS} characters"
                )
            )
    elif step.error_code is None:
        violations.append(FieldViolation("outcome", "a result_json or an error"))
    else:
        if not ERROR_CODE.fullmatch(step.error_code):
            violations.append(
                FieldViolation("outcome.error.code", "1..64 of A-Z, 0-9 and _, e.g. JOB_REJECTED")
            )
        message = step.error_message
        if len(message) > MAX_ERROR_MESSAGE_CHARS or "\x00" in message:
            violations.append(
                FieldViolation(
                    "outcome.error.message", f"at most {MAX_ERROR_MESSAGE_CHARS} characters, no NUL"
                )
            )
    return violations


def _is_json(text: str) -> bool:
    """A JSON value PostgreSQL's text column and the worker both take (no NUL anywhere)."""
    if "\x00" in text or "\\u0000" in text:
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
