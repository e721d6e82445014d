"""An OpenAI-compatible chat-completions provider on httpx (OpenAI, DeepSeek and peers).

``POST {base_url}/chat/completions`` with ``response_format: {"type": "json_object"}``
(the JSON mode every compatible API accepts). Given ``on_delta``, the call streams
(``stream: true``, server-sent events, ``stream_options.include_usage`` so that the last
chunk carries the token usage): each content delta goes to ``on_delta`` as it arrives, and
the joined text is then parsed exactly as a whole answer is. A server that ignores
``stream`` and answers with one JSON body is parsed as usual. Cancelling the call closes the
stream's connection: the provider stops generating (and billing). How answers map to error
codes:

    HTTP 429                     PROVIDER_RATE_LIMITED (Retry-After honoured: retry_after_s)
    HTTP 5xx                     PROVIDER_UNAVAILABLE
    HTTP 408, read/write timeout PROVIDER_TIMEOUT
    connect failure / timeout    PROVIDER_UNAVAILABLE / PROVIDER_TIMEOUT
    HTTP 401                     CREDENTIAL_INVALID       (never retried)
    HTTP 403                     CREDENTIAL_FORBIDDEN     (never retried)
    other 4xx                    PROVIDER_REQUEST_REJECTED
    an error event mid-stream    PROVIDER_UNAVAILABLE
    a body that is not a chat completion (or a stream of no completion chunk)
                                 VALIDATION_OUTPUT_MALFORMED

Content that is not a JSON object is an answer all the same: the response carries its text
with ``parsed`` None, and the job's pipeline judges it as it judges a JSON answer off its
schema (one repair call, jobtypes/aijob.py ``run_step``), instead of failing the attempt
here and paying for the same prompt again on the next one.

Error details name the status and the failure, never the key, the prompt or the answer.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from shared.ai.provider import DeltaSink, ProviderRequest, ProviderResponse
from shared.errors import ErrorCode, ExecutionError
from worker_service.adapters.sse import event_data

# Longest Retry-After taken at its word; a larger one is capped (the job's backoff cap and
# the job service's bound apply on top).
MAX_RETRY_AFTER_S = 600.0


class OpenAICompatibleProvider:
    """One connection pool per base URL; ``aclose()`` releases it."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str = "openai",
        default_api_key: str | None = None,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self._default_api_key = default_api_key
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
            transport=transport,
        )

    async def generate(
        self, request: ProviderRequest, on_delta: DeltaSink | None = None
    ) -> ProviderResponse:
        key = request.api_key or self._default_api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        if request.json_output:
            body["response_format"] = {"type": "json_object"}
        if request.max_tokens:
            body["max_tokens"] = request.max_tokens
        if on_delta is not None:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        started = time.monotonic()
        try:
            if on_delta is not None:
                return await self._stream(body, headers, request, on_delta, started)
            response = await self._client.post("/chat/completions", json=body, headers=headers)
        except httpx.ConnectTimeout:
            raise ExecutionError(ErrorCode.PROVIDER_TIMEOUT, "connect timeout") from None
        except httpx.TimeoutException as exc:
            raise ExecutionError(ErrorCode.PROVIDER_TIMEOUT, type(exc).__name__) from None
        except httpx.TransportError as exc:
            raise ExecutionError(ErrorCode.PROVIDER_UNAVAILABLE, type(exc).__name__) from None
        latency_ms = int((time.monotonic() - started) * 1000)
        _raise_for_status(response)
        return _parse(response, request, latency_ms)

    async def _stream(
        self,
        body: dict[str, Any],
        headers: dict[str, str],
        request: ProviderRequest,
        on_delta: DeltaSink,
        started: float,
    ) -> ProviderResponse:
        # Leaving this block before the end (cancelled, or a failure) closes the connection.
        async with self._client.stream(
            "POST", "/chat/completions", json=body, headers=headers
        ) as response:
            _raise_for_status(response)
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()
                return _parse(response, request, int((time.monotonic() - started) * 1000))
            streamed = await read_stream(event_data(response.aiter_lines()), on_delta)
        parsed = json_object(streamed.text) if request.json_output else None
        return ProviderResponse(
            text=streamed.text,
            parsed=parsed,
            input_tokens=_count(streamed.usage.get("prompt_tokens")),
            output_tokens=_count(streamed.usage.get("completion_tokens")),
            latency_ms=int((time.monotonic() - started) * 1000),
            model=streamed.model or request.model,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


@dataclass
class StreamedAnswer:
    text: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""


async def read_stream(events: AsyncIterator[str], on_delta: DeltaSink) -> StreamedAnswer:
    """Reads chat-completion chunks up to ``[DONE]`` (or the end of the stream), passing
    each content delta of the first choice to ``on_delta``."""
    answer = StreamedAnswer()
    parts: list[str] = []
    chunks = 0
    done = False
    async for data in events:
        # after [DONE] the body is read to its end, not abandoned: the connection then goes
        # back to the pool instead of being closed
        done = done or data.strip() == "[DONE]"
        if done:
            continue
        try:
            chunk = json.loads(data)
            if not isinstance(chunk, dict):
                raise TypeError("not an object")
        except (ValueError, TypeError):
            raise ExecutionError(
                ErrorCode.VALIDATION_OUTPUT_MALFORMED, "a stream event is not a completion chunk"
            ) from None
        if "error" in chunk:  # some servers report a failure mid-stream this way
            raise ExecutionError(ErrorCode.PROVIDER_UNAVAILABLE, "the stream reported an error")
        chunks += 1
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            answer.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            answer.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str) and text:
                parts.append(text)
                on_delta(text)
    if chunks == 0:
        raise ExecutionError(ErrorCode.VALIDATION_OUTPUT_MALFORMED, "an empty completion stream")
    answer.text = "".join(parts)
    return answer


def _raise_for_status(response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    detail = f"HTTP {status}"
    if status == 429:
        raise ExecutionError(
            ErrorCode.PROVIDER_RATE_LIMITED,
            detail,
            retry_after_s=retry_after_s(response.headers.get("retry-after")),
        )
    if status >= 500:
        raise ExecutionError(ErrorCode.PROVIDER_UNAVAILABLE, detail)
    if status == 408:
        raise ExecutionError(ErrorCode.PROVIDER_TIMEOUT, detail)
    if status == 401:
        raise ExecutionError(ErrorCode.CREDENTIAL_INVALID, detail)
    if status == 403:
        raise ExecutionError(ErrorCode.CREDENTIAL_FORBIDDEN, detail)
    raise ExecutionError(ErrorCode.PROVIDER_REQUEST_REJECTED, detail)


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(MAX_RETRY_AFTER_S, max(0.0, seconds))


def _parse(response: httpx.Response, request: ProviderRequest, latency_ms: int) -> ProviderResponse:
    try:
        body = response.json()
        text = body["choices"][0]["message"]["content"]
        if not isinstance(text, str):
            raise TypeError("content is not text")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ExecutionError(
            ErrorCode.VALIDATION_OUTPUT_MALFORMED, f"not a chat completion ({type(exc).__name__})"
        ) from None
    parsed = json_object(text) if request.json_output else None
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return ProviderResponse(
        text=text,
        parsed=parsed,
        input_tokens=_count(usage.get("prompt_tokens")),
        output_tokens=_count(usage.get("completion_tokens")),
        latency_ms=latency_ms,
        model=str(body.get("model") or request.model),
    )


def json_object(text: str) -> dict[str, Any] | None:
    """The answer's JSON object, or None when it is not one (the pipeline says why)."""
    try:
        value = json.loads(text.strip())
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
