"""Checkpointed provider calls, as both services see them: a step is a named provider call
of a job (``evaluate``, ``summarise``); once its response is recorded (ExecutorService
RecordStep, fenced by the lease), a later attempt of the job reuses it instead of paying
for the call again.

A recorded response is the job's data, protected like its output: never logged (the
reprs below hide it), deleted with the job (``job_steps`` cascades).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from shared.ai.provider import ProviderResponse

STEP_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
# A step's response text is cut off here when recorded (a model answer is far smaller).
MAX_RESPONSE_CHARS = 1_000_000


@dataclass(frozen=True)
class StepResponse:
    """A provider's answer as a step records it."""

    text: str = field(repr=False)
    parsed: dict[str, Any] | None = field(repr=False)
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    # Who answered, as usage rows name it ("fake", "openai").
    provider: str = ""

    @classmethod
    def of(cls, response: ProviderResponse, provider: str) -> StepResponse:
        return cls(
            response.text,
            response.parsed,
            response.model,
            response.input_tokens,
            response.output_tokens,
            provider,
        )

    def replayed(self) -> ProviderResponse:
        """The recorded answer as the job code sees a provider's (it took no time)."""
        return ProviderResponse(
            text=self.text,
            parsed=self.parsed,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            latency_ms=0,
            model=self.model,
        )


@dataclass(frozen=True)
class RecordedStep:
    """A step an earlier attempt of the job recorded."""

    step: str
    response: StepResponse
    attempt: int
    call_id: str
