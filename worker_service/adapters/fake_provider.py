"""The deterministic fake provider: the embedded default, for development, tests and
benchmarks. It answers each prompt with its template's ``fake`` function (same variables,
same answer), after an optional latency, and can inject failures.

Knobs (``FakeSettings``, from ``JOBS_FAKE_*`` through the model router):

* ``latency_ms``: every call takes this long (cancellable, like a real call);
* ``failure``: an error code to raise (``PROVIDER_UNAVAILABLE``, ``PROVIDER_RATE_LIMITED``,
  ``PROVIDER_TIMEOUT``, ``CREDENTIAL_INVALID`` ...); ``VALIDATION_OUTPUT_MALFORMED`` is
  not raised but answered, as a model does it: text that is not JSON (``parsed`` None),
  which the job's pipeline judges (and repairs);
* ``failure_rate``: the share of calls that fail with it (1.0: all), drawn from a seeded
  generator so a run repeats exactly;
* ``fail_first``: the first N calls fail, the rest succeed;
* ``stream_chunks``: given ``on_delta``, the answer streams in this many pieces of (about)
  equal length, the latency spread evenly before them, so a streamed call takes as long as
  a whole one and its pieces are the same every run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from dataclasses import dataclass

from shared.ai.prompts import PromptNotFound, get_prompt
from shared.ai.provider import DeltaSink, ProviderRequest, ProviderResponse
from shared.errors import ErrorCode, ExecutionError

log = logging.getLogger(__name__)
# One line per call, written before the call does anything: the chaos checker counts them
# (the calls of a worker killed mid-call included) against the usage rows stored.
CALL_LOG = "fake provider call %d"
# One line per call that answered (the paid ones): the chaos checker's calls per succeeded
# job (tests/chaos/step_faults.py) counts them by the job the line names.
ANSWER_LOG = "fake provider answered call %d"


@dataclass(frozen=True)
class FakeSettings:
    latency_ms: int = 0
    failure: str = ""
    failure_rate: float = 0.0
    fail_first: int = 0
    seed: int = 0
    stream_chunks: int = 8


def estimate_tokens(text: str) -> int:
    """Roughly four characters a token, as providers count English."""
    return max(1, len(text) // 4)


def chunked(text: str, count: int) -> list[str]:
    """``text`` cut into ``count`` pieces of about equal length (fewer when it is shorter)."""
    size = max(1, -(-len(text) // max(1, count)))
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeProvider:
    name = "fake"

    def __init__(self, settings: FakeSettings | None = None) -> None:
        self.settings = settings or FakeSettings()
        self._random = random.Random(self.settings.seed)
        self.calls = 0

    async def generate(
        self, request: ProviderRequest, on_delta: DeltaSink | None = None
    ) -> ProviderResponse:
        started = time.monotonic()
        self.calls += 1
        log.info(CALL_LOG, self.calls)
        s = self.settings
        failing = self.calls <= s.fail_first or (
            s.failure_rate > 0 and self._random.random() < s.failure_rate
        )
        streaming = on_delta is not None and s.stream_chunks > 0 and not (s.failure and failing)
        if s.latency_ms and not streaming:
            await asyncio.sleep(s.latency_ms / 1000)
        if s.failure and failing:
            if s.failure == ErrorCode.VALIDATION_OUTPUT_MALFORMED:
                return _prose(request, started)
            retry_after = 0.0 if s.failure == ErrorCode.PROVIDER_RATE_LIMITED else None
            raise ExecutionError(s.failure, "fake provider: injected failure", {}, retry_after)
        try:
            template = get_prompt(request.prompt_key, request.prompt_version)
        except PromptNotFound:
            raise ExecutionError(
                ErrorCode.PROVIDER_REQUEST_REJECTED,
                f"fake provider: no prompt {request.prompt_key}@{request.prompt_version}",
            ) from None
        if template.fake is None:
            raise ExecutionError(
                ErrorCode.PROVIDER_REQUEST_REJECTED, "fake provider: the prompt has no fake answer"
            )
        answer = template.fake(request.variables)
        text = json.dumps(answer, ensure_ascii=False)
        if streaming and on_delta is not None:
            for piece in chunked(text, s.stream_chunks):
                if s.latency_ms:
                    await asyncio.sleep(s.latency_ms / 1000 / s.stream_chunks)
                on_delta(piece)
        log.info(ANSWER_LOG, self.calls)
        return ProviderResponse(
            text=text,
            parsed=answer,
            input_tokens=sum(estimate_tokens(m.content) for m in request.messages),
            output_tokens=estimate_tokens(text),
            latency_ms=int((time.monotonic() - started) * 1000),
            model=request.model,
        )

    async def aclose(self) -> None:
        return None


def _prose(request: ProviderRequest, started: float) -> ProviderResponse:
    """A malformed answer: prose where a JSON object was asked for."""
    text = "Sure! Here is my evaluation, in words rather than JSON."
    return ProviderResponse(
        text=text,
        parsed=None,
        input_tokens=sum(estimate_tokens(m.content) for m in request.messages),
        output_tokens=estimate_tokens(text),
        latency_ms=int((time.monotonic() - started) * 1000),
        model=request.model,
    )
