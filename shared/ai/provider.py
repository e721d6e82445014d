"""The provider port: one model call, whatever answers it.

A provider turns a ``ProviderRequest`` (chat messages for one model, the key to use) into a
``ProviderResponse`` (text, parsed JSON, token usage, latency) or raises
``shared.errors.ExecutionError`` with a code whose class decides retries:

    PROVIDER_*    timeout, 5xx, rate limit (``retry_after_s`` from Retry-After): retried
    CREDENTIAL_*  401 / 403: never retried
    VALIDATION_*  the reply is no answer at all (not a chat completion): retried

An answer whose text is not the JSON object asked for is still an answer: the response
carries the text with ``parsed`` None, and the job's pipeline judges it (and makes its
repair call) as it judges an answer off the output schema.

Cancellation is asyncio's: cancelling the awaiting task abandons the call (an HTTP
provider closes its connection).

Streaming: given ``on_delta``, a provider that can streams the answer and calls it with each
piece of text as it arrives (synchronously, so it must not block); the response is the same
as without it (``text`` is the pieces joined).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, Protocol

# Receives each piece of a streamed answer's text, in order.
DeltaSink = Callable[[str], None]


class ModelTier(StrEnum):
    """What a job type asks for; the model router maps it to a provider and a model."""

    PRIMARY = "primary"
    CHEAP = "cheap"


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True)
class ProviderRequest:
    model: str
    messages: tuple[Message, ...]
    # None: the platform key configured for the tier.
    api_key: str | None = None
    # Which prompt produced the messages; a fake provider answers from it.
    prompt_key: str = ""
    prompt_version: str = ""
    variables: dict[str, Any] = field(default_factory=dict)
    # Ask for a JSON object as the answer.
    json_output: bool = True
    temperature: float = 0.2
    max_tokens: int | None = None

    def __repr__(self) -> str:  # never show a key (or the prompt) in a log line or traceback
        return (
            f"ProviderRequest(model={self.model!r}, prompt={self.prompt_key}@{self.prompt_version})"
        )


@dataclass(frozen=True)
class ProviderResponse:
    text: str
    # The answer as a JSON object when one was asked for; None when it is not one.
    parsed: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    latency_ms: int
    model: str


@dataclass(frozen=True)
class UsageRecord:
    """One provider call as accounted: stored as a usage row with the attempt's outcome."""

    provider: str
    model: str
    credential_mode: str
    input_tokens: int = 0
    output_tokens: int = 0
    # US dollars, exact (at most six decimals)
    cost_usd: Decimal = Decimal(0)
    latency_ms: int = 0
    # Empty when the call succeeded.
    error_code: str = ""
    # The worker's id of the call (a uuid): a record reported twice is stored once.
    call_id: str = ""
    # No call was made: the attempt reused the response an earlier attempt recorded for
    # the step (worker_service/steps.py); tokens and cost are 0.
    reused: bool = False


class Provider(Protocol):
    """A model provider. ``name`` is recorded with each call's usage."""

    @property
    def name(self) -> str: ...

    async def generate(
        self, request: ProviderRequest, on_delta: DeltaSink | None = None
    ) -> ProviderResponse: ...

    async def aclose(self) -> None: ...
