"""What an attempt did, as the job service is told it: one place maps exceptions, cancel
causes and job results to ``Succeeded`` / ``Failed``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from shared.errors import ErrorCode, ExecutionError
from shared.output_hash import output_hash
from shared.registry import ArtifactDraft, JobDefinition, JobResult
from shared.validation import describe_validation_error
from worker_service.domain.model import CancelCause, Failed, SignalWait, Succeeded

# error_message is operator detail; bound it so a runaway message cannot bloat the row.
MAX_ERROR_MESSAGE_CHARS = 4000

_CAUSE_CODES: dict[CancelCause, ErrorCode | None] = {
    CancelCause.CANCEL_REQUESTED: ErrorCode.CANCELLED,
    CancelCause.SHUTDOWN: ErrorCode.WORKER_SHUTDOWN,
    CancelCause.LEASE_LOST: None,  # another worker owns the job: say nothing
}

_CAUSE_MESSAGES: dict[CancelCause, str] = {
    CancelCause.CANCEL_REQUESTED: "cancelled while running",
    CancelCause.SHUTDOWN: "handed back by a draining worker",
    CancelCause.LEASE_LOST: "lease lost",
}


def failure_for_cause(cause: CancelCause) -> Failed | None:
    """The failure a stopped attempt reports, or None when it must report nothing."""
    code = _CAUSE_CODES[cause]
    return None if code is None else Failed(code, _CAUSE_MESSAGES[cause])


def failure_for(exc: Exception) -> Failed:
    """The failure an exception raised by an attempt stands for."""
    if isinstance(exc, ExecutionError):
        return Failed(
            exc.code or ErrorCode.INTERNAL_ERROR,
            _bounded(exc.detail),
            retry_after_s=exc.retry_after_s,
            signals_seen=exc.signals_seen if isinstance(exc, SignalWait) else 0,
        )
    if isinstance(exc, ValidationError):
        # str(ValidationError) quotes the offending values: keep locations and messages only.
        return Failed(
            ErrorCode.INTERNAL_ERROR, _bounded(f"ValidationError: {describe_validation_error(exc)}")
        )
    return Failed(ErrorCode.INTERNAL_ERROR, _bounded(f"{type(exc).__name__}: {exc}"))


def timed_out(timeout_s: float) -> Failed:
    return Failed(ErrorCode.TIMEOUT, f"no result within {timeout_s:g}s")


def succeeded(definition: JobDefinition, result: JobResult) -> Succeeded:
    """The validated, hashed result; ExecutionError(VALIDATION_OUTPUT_SCHEMA) when the
    output does not match the definition's output model."""
    raw: Any = result.output
    if isinstance(raw, BaseModel):
        # warnings=False: a mistyped field would otherwise be reported with its value.
        raw = raw.model_dump(warnings=False)
    try:
        output = definition.output_model.model_validate(raw)
    except ValidationError as exc:
        raise ExecutionError(
            ErrorCode.VALIDATION_OUTPUT_SCHEMA,
            describe_validation_error(exc, MAX_ERROR_MESSAGE_CHARS),
        ) from None
    data = output.model_dump(mode="json")
    artifacts = [
        ArtifactDraft(
            artifact_type=a.artifact_type,
            artifact_id=a.artifact_id,
            payload=to_jsonable_python(a.payload),
            ordinal=a.ordinal,
        )
        for a in result.artifacts
    ]
    # replace(), not a new draft: every other field (a join's depends_on_keys and policy)
    # goes through as the job type set it
    children = [replace(c, input=to_jsonable_python(c.input)) for c in result.children]
    return Succeeded(
        output=data, output_hash=output_hash(data), artifacts=artifacts, children=children
    )


def _bounded(message: str) -> str:
    if len(message) <= MAX_ERROR_MESSAGE_CHARS:
        return message
    return message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"
