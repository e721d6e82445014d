"""Conversions between protobuf messages and Python values: the well-known types, and the
records both services exchange (an artifact, a provider call's usage). Each direction of
each conversion is written here once."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from google.protobuf import struct_pb2, timestamp_pb2

from shared.ai.provider import UsageRecord
from shared.ai.steps import RecordedStep, StepResponse
from shared.durable_steps import StepResult
from shared.execution import ArtifactDraft
from shared.pb.jobs.v1 import executor_service_pb2, job_pb2

_INT32_MAX = 2**31 - 1


def struct_from_dict(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def dict_from_struct(message: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as plain Python values. Struct numbers are doubles: whole numbers come back
    as ints so that pydantic int fields accept them. NaN and infinities come back as such
    (a Struct can hold them; JSON cannot): whoever needs JSON refuses them by name."""
    return {key: _value(value) for key, value in message.fields.items()}


def _value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "struct_value":
        return dict_from_struct(value.struct_value)
    if kind == "list_value":
        return [_value(item) for item in value.list_value.values]
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or a Value with nothing set


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


# --- artifacts -------------------------------------------------------------------------


class ArtifactFields(Protocol):
    """An artifact as either side holds it: a worker's ``ArtifactDraft``, or one the job
    service stored."""

    @property
    def artifact_type(self) -> str: ...
    @property
    def artifact_id(self) -> str: ...
    @property
    def ordinal(self) -> int: ...
    @property
    def payload(self) -> dict[str, Any]: ...


def artifact_to_pb(artifact: ArtifactFields) -> job_pb2.Artifact:
    return job_pb2.Artifact(
        artifact_type=artifact.artifact_type,
        artifact_id=artifact.artifact_id,
        ordinal=artifact.ordinal,
        payload=struct_from_dict(artifact.payload),
    )


def artifact_from_pb(message: job_pb2.Artifact) -> ArtifactDraft:
    return ArtifactDraft(
        artifact_type=message.artifact_type,
        artifact_id=message.artifact_id,
        ordinal=message.ordinal,
        payload=dict_from_struct(message.payload),
    )


# --- provider usage --------------------------------------------------------------------


def usage_to_pb(usage: UsageRecord) -> executor_service_pb2.ProviderUsage:
    return executor_service_pb2.ProviderUsage(
        provider=usage.provider,
        model=usage.model,
        credential_mode=usage.credential_mode,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=float(usage.cost_usd),
        cost_usd_decimal=str(usage.cost_usd),
        latency_ms=usage.latency_ms,
        error_code=usage.error_code,
        call_id=usage.call_id,
        reused=usage.reused,
    )


def usage_from_pb(message: executor_service_pb2.ProviderUsage) -> UsageRecord:
    """A worker's account of a provider call, bounded to what a usage row holds: names
    truncated (an empty one is ``unknown``), counts clamped, an implausible cost zeroed.
    A reused step made no call: whatever it claims, it has no tokens and costs nothing."""
    record = UsageRecord(
        provider=message.provider[:64] or "unknown",
        model=message.model[:255] or "unknown",
        credential_mode=message.credential_mode[:16] or "platform",
        input_tokens=max(0, min(message.input_tokens, _INT32_MAX)),
        output_tokens=max(0, min(message.output_tokens, _INT32_MAX)),
        cost_usd=_cost(message),
        latency_ms=max(0, min(message.latency_ms, _INT32_MAX)),
        error_code=message.error_code[:100],
        call_id=message.call_id[:64],
    )
    if message.reused:
        return replace(record, input_tokens=0, output_tokens=0, cost_usd=Decimal(0), reused=True)
    return record


_MICRODOLLAR = Decimal("0.000001")
_MAX_COST = Decimal(100_000_000)


def _cost(message: executor_service_pb2.ProviderUsage) -> Decimal:
    """A call's cost to six decimals: ``cost_usd_decimal``, else the older double; zero
    when malformed, negative or implausibly large (nothing a worker sends fails a call)."""
    try:
        cost = Decimal(message.cost_usd_decimal or repr(message.cost_usd))
    except ArithmeticError:  # decimal.InvalidOperation: not a number
        return Decimal(0)
    if not cost.is_finite() or not 0 <= cost < _MAX_COST:
        return Decimal(0)
    return cost.quantize(_MICRODOLLAR)


def step_response_to_pb(response: StepResponse) -> executor_service_pb2.StepResponse:
    return executor_service_pb2.StepResponse(
        text=response.text,
        parsed_json="" if response.parsed is None else json.dumps(response.parsed),
        model=response.model,
        input_tokens=response.input_tokens,
        output_tokens=response.output_tokens,
        provider=response.provider,
    )


def step_response_from_pb(message: executor_service_pb2.StepResponse) -> StepResponse:
    """ValueError when ``parsed_json`` is not a JSON object."""
    parsed = json.loads(message.parsed_json) if message.parsed_json else None
    if parsed is not None and not isinstance(parsed, dict):
        raise ValueError("parsed_json is not a JSON object")
    return StepResponse(
        text=message.text,
        parsed=parsed,
        model=message.model,
        input_tokens=max(0, min(message.input_tokens, _INT32_MAX)),
        output_tokens=max(0, min(message.output_tokens, _INT32_MAX)),
        provider=message.provider[:64],
    )


def recorded_step_to_pb(step: RecordedStep) -> executor_service_pb2.RecordedStep:
    return executor_service_pb2.RecordedStep(
        step=step.step,
        response=step_response_to_pb(step.response),
        attempt=step.attempt,
        call_id=step.call_id,
    )


def recorded_step_from_pb(message: executor_service_pb2.RecordedStep) -> RecordedStep:
    return RecordedStep(
        step=message.step,
        response=step_response_from_pb(message.response),
        attempt=message.attempt,
        call_id=message.call_id,
    )


def step_outcome_to_pb(result: StepResult) -> executor_service_pb2.StepOutcome:
    if result.result_json is not None:
        return executor_service_pb2.StepOutcome(result_json=result.result_json)
    return executor_service_pb2.StepOutcome(
        error=executor_service_pb2.StepError(
            code=result.error_code or "", message=result.error_message
        )
    )


def step_result_to_pb(result: StepResult) -> executor_service_pb2.StepResult:
    return executor_service_pb2.StepResult(
        ordinal=result.ordinal,
        name=result.name,
        outcome=step_outcome_to_pb(result),
        attempt=result.attempt,
    )


def step_result_from_pb(
    ordinal: int, name: str, outcome: executor_service_pb2.StepOutcome, attempt: int = 0
) -> StepResult:
    """As the message says, unchecked (the job service checks what it is sent)."""
    if outcome.WhichOneof("outcome") == "result_json":
        return StepResult(ordinal, name, result_json=outcome.result_json, attempt=attempt)
    return StepResult(
        ordinal,
        name,
        error_code=outcome.error.code,
        error_message=outcome.error.message,
        attempt=attempt,
    )
