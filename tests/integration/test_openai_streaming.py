"""The OpenAI-compatible provider streaming from the local server: pieces as they come, the
usage from the final chunk, and a cancel that closes the stream (the server stops)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from devstack.openai_server import LocalOpenAIServer, Reply, completion
from jobtypes import feynman_evaluation as feynman
from shared.errors import ExecutionError
from tests.integration.test_openai_provider import FEYNMAN_VARIABLES, PLATFORM_KEY, request
from tests.support.wait import eventually
from worker_service.adapters.openai_compat import OpenAICompatibleProvider


@pytest.fixture
async def server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer(stream_interval_s=0.05, stream_chunk_chars=8) as running:
        yield running


@pytest.fixture
async def provider(server: LocalOpenAIServer) -> AsyncIterator[OpenAICompatibleProvider]:
    client = OpenAICompatibleProvider(server.url, default_api_key=PLATFORM_KEY, read_timeout_s=5)
    yield client
    await client.aclose()


async def test_a_streamed_answer_arrives_in_pieces_that_join_to_the_parsed_output(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    pieces: list[tuple[str, float]] = []

    response = await provider.generate(
        request(), on_delta=lambda text: pieces.append((text, time.time()))
    )

    assert response.parsed == feynman.PROMPT.fake(FEYNMAN_VARIABLES)  # type: ignore[misc]
    assert "".join(p for p, _ in pieces) == response.text
    assert [p for p, _ in pieces] == [s.text for s in server.sent]  # one delta per chunk
    assert len(pieces) > 5
    # usage came from the final chunk (include_usage), as without streaming
    assert response.input_tokens > 0 and response.output_tokens > 0
    assert response.model == "deepseek-chat"
    [seen] = server.requests
    assert seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True}
    # each piece reached the caller as it was sent, not all at the end
    assert pieces[0][1] < server.sent[-1].at


async def test_cancelling_mid_stream_closes_the_connection_and_the_server_stops(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    pieces: list[str] = []
    call = asyncio.create_task(provider.generate(request(), on_delta=pieces.append))
    await eventually(lambda: len(pieces) >= 3, timeout=10)

    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(server.disconnected.wait(), 5)  # the server saw the hang-up
    assert server.disconnects == 1
    sent_when_cancelled = len(server.sent)
    whole = len((await provider.generate(request())).text)  # still usable (not streamed)
    assert len(server.sent) == sent_when_cancelled  # nothing more was generated
    assert sum(len(s.text) for s in server.sent) < whole


async def test_a_server_that_ignores_stream_is_read_as_one_answer(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    server.script(Reply(body=completion('{"score": 1}', "m", 5)))
    pieces: list[str] = []

    response = await provider.generate(request(), on_delta=pieces.append)

    assert response.parsed == {"score": 1} and response.input_tokens == 5
    assert pieces == []


async def test_an_error_status_on_a_streamed_call_maps_as_usual(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    server.script(Reply(status=429, headers={"Retry-After": "2"}))

    with pytest.raises(ExecutionError) as raised:
        await provider.generate(request(), on_delta=lambda _: None)

    assert raised.value.code == "PROVIDER_RATE_LIMITED" and raised.value.retry_after_s == 2


@pytest.mark.slow
async def test_streamed_calls_reuse_the_connection(
    server: LocalOpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    for _ in range(3):
        await provider.generate(request(), on_delta=lambda _: None)

    assert server.connections == 1


async def test_a_stream_that_stalls_is_a_provider_timeout_and_is_hung_up() -> None:
    async with LocalOpenAIServer(stream_interval_s=5.0) as stalling:
        impatient = OpenAICompatibleProvider(stalling.url, read_timeout_s=0.3)
        pieces: list[str] = []
        try:
            with pytest.raises(ExecutionError) as raised:
                await impatient.generate(request(), on_delta=pieces.append)
        finally:
            await impatient.aclose()
        await asyncio.wait_for(stalling.disconnected.wait(), 10)

    assert raised.value.code == "PROVIDER_TIMEOUT"
    assert len(pieces) == 1  # the first chunk came, then nothing within the read timeout
