"""The real OpenAI-compatible HTTP client against a local server speaking the same protocol:
answers, every error mapping of DESIGN §7, slow answers, and cancellation mid-request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from devstack.embedded import free_port
from devstack.openai_server import LocalOpenAIServer, Reply, completion
from jobtypes import feynman_evaluation as feynman
from shared.ai.provider import ProviderRequest
from shared.errors import ErrorClass, ExecutionError, classify
from tests.support.wait import eventually
from worker_service.adapters.openai_compat import OpenAICompatibleProvider, retry_after_s

PLATFORM_KEY = "sk-platform-0123456789abcdefghij"
USER_KEY = "sk-user-0123456789abcdefghijklmn"

FEYNMAN_VARIABLES = {
    "title": "Photosynthesis",
    "content": "Plants convert light energy, water and carbon dioxide into glucose and oxygen.",
    "explanation": "Plants use light and water to make glucose.",
}


def request(api_key: str | None = None) -> ProviderRequest:
    rendered = feynman.PROMPT.render(FEYNMAN_VARIABLES)
    return ProviderRequest(
        model="deepseek-chat",
        messages=rendered.messages,
        api_key=api_key,
        prompt_key=rendered.key,
        prompt_version=rendered.version,
        variables=rendered.variables,
    )


@pytest.fixture
async def server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer() as running:
        yield running


@pytest.fixture
async def provider(server: LocalOpenAIServer) -> AsyncIterator[OpenAICompatibleProvider]:
    client = OpenAICompatibleProvider(
        server.url, default_api_key=PLATFORM_KEY, read_timeout_s=2.0, connect_timeout_s=1.0
    )
    yield client
    await client.aclose()


async def failure_of(provider: OpenAICompatibleProvider, **kwargs: str) -> ExecutionError:
    with pytest.raises(ExecutionError) as raised:
        await provider.generate(request(**kwargs))
    return raised.value


async def test_a_chat_completion_with_json_output_and_usage(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    response = await provider.generate(request())

    assert response.parsed == feynman.PROMPT.fake(FEYNMAN_VARIABLES)  # type: ignore[misc]
    assert response.input_tokens > 0 and response.output_tokens > 0
    assert response.model == "deepseek-chat"
    [seen] = server.requests
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == f"Bearer {PLATFORM_KEY}"
    assert seen.body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in seen.body["messages"]] == ["system", "user"]


async def test_a_jobs_own_key_replaces_the_platform_key(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    await provider.generate(request(api_key=USER_KEY))

    assert server.requests[-1].headers["authorization"] == f"Bearer {USER_KEY}"


async def test_429_is_a_retryable_rate_limit_honouring_retry_after(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    server.script(Reply(status=429, headers={"Retry-After": "3"}))

    error = await failure_of(provider)

    assert error.code == "PROVIDER_RATE_LIMITED"
    assert error.retry_after_s == 3.0
    assert classify(error.code) is ErrorClass.PROVIDER


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_is_a_retryable_provider_error(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider, status: int
) -> None:
    server.script(Reply(status=status))

    assert (await failure_of(provider)).code == "PROVIDER_UNAVAILABLE"


@pytest.mark.parametrize(
    ("status", "code"), [(401, "CREDENTIAL_INVALID"), (403, "CREDENTIAL_FORBIDDEN")]
)
async def test_401_and_403_are_credential_errors_that_never_name_the_key(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider, status: int, code: str
) -> None:
    server.script(Reply(status=status))

    error = await failure_of(provider, api_key=USER_KEY)

    assert error.code == code
    assert classify(error.code) is ErrorClass.CREDENTIAL
    assert USER_KEY not in str(error) and PLATFORM_KEY not in str(error)


async def test_a_wrong_key_is_refused_by_the_server_as_401() -> None:
    async with LocalOpenAIServer(api_key="sk-right") as server:
        client = OpenAICompatibleProvider(server.url, default_api_key="sk-wrong")
        try:
            with pytest.raises(ExecutionError) as raised:
                await client.generate(request())
        finally:
            await client.aclose()
    assert raised.value.code == "CREDENTIAL_INVALID"


async def test_a_slow_answer_is_a_provider_timeout(server: LocalOpenAIServer) -> None:
    server.script(Reply(delay_s=5.0))
    impatient = OpenAICompatibleProvider(server.url, read_timeout_s=0.3)
    try:
        error = await failure_of(impatient)
    finally:
        await impatient.aclose()

    assert error.code == "PROVIDER_TIMEOUT"
    await eventually(lambda: server.disconnects == 1, timeout=5)


async def test_a_slow_answer_within_the_timeout_succeeds(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    server.script(Reply(delay_s=0.3))

    response = await provider.generate(request())

    assert response.parsed is not None and response.latency_ms >= 300


async def test_no_server_is_a_retryable_provider_error() -> None:
    client = OpenAICompatibleProvider(f"http://127.0.0.1:{free_port()}/v1", connect_timeout_s=1)
    try:
        with pytest.raises(ExecutionError) as raised:
            await client.generate(request())
    finally:
        await client.aclose()
    assert classify(raised.value.code) is ErrorClass.PROVIDER


@pytest.mark.parametrize(
    "body", ["not json at all", {"choices": []}], ids=["body-not-json", "no-choices"]
)
async def test_a_body_that_is_no_chat_completion_is_a_validation_error(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider, body: object
) -> None:
    server.script(Reply(body=body))  # type: ignore[arg-type]

    error = await failure_of(provider)

    assert error.code == "VALIDATION_OUTPUT_MALFORMED"
    assert classify(error.code) is ErrorClass.VALIDATION


@pytest.mark.parametrize(
    "content",
    ["this is prose, not JSON", "[1, 2, 3]", "```json\n{}\n```"],
    ids=["content-prose", "content-array", "content-fenced"],
)
async def test_content_that_is_no_json_object_is_answered_for_the_pipeline_to_judge(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider, content: str
) -> None:
    """Issue 25: not refused here (that failed the attempt before the job's repair step);
    the text comes back unparsed and the pipeline repairs it like an answer off schema."""
    server.script(Reply(body=completion(content, "m")))

    response = await provider.generate(request())

    assert (response.text, response.parsed) == (content, None)


async def test_cancelling_mid_request_abandons_the_http_call(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    server.script(Reply(delay_s=30.0))
    call = asyncio.create_task(provider.generate(request()))
    await eventually(lambda: len(server.requests) == 1, timeout=5)

    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(server.disconnected.wait(), 5)  # the connection was closed
    assert server.disconnects == 1
    # and the client is still usable afterwards
    assert (await provider.generate(request())).parsed is not None


def test_retry_after_as_seconds_or_http_date() -> None:
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("7", now) == 7.0
    assert retry_after_s("Mon, 30 Nov 2026 12:00:10 GMT", now) == 10.0
    assert retry_after_s("Mon, 30 Nov 2026 11:00:00 GMT", now) == 0.0
    assert retry_after_s("99999", now) == 600.0
    assert retry_after_s("soon", now) is None
    assert retry_after_s(None, now) is None
