"""Streaming pieces without a network: the SSE reader, the chat-completion chunk reader, the
fake provider's pieces, and the coalescing of deltas into partial-output messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from jobtypes import feynman_evaluation as feynman
from shared.ai.provider import ModelTier, ProviderRequest, UsageRecord
from shared.constants import partial_subject
from shared.errors import ExecutionError
from shared.pb.jobs.v1 import job_service_pb2 as pb
from tests.support.wait import eventually
from worker_service.adapters.fake_provider import FakeProvider, FakeSettings, chunked
from worker_service.adapters.openai_compat import read_stream
from worker_service.adapters.sse import event_data
from worker_service.gateway import ModelGateway
from worker_service.model_router import ModelRouter, PriceTable, Route
from worker_service.partial_output import PartialOutputRelay

JOB = "0b6b0a44-2f1c-4d8e-9c7e-1d0a5d5c9f11"


async def lines(items: Iterable[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


async def collect(items: AsyncIterator[str]) -> list[str]:
    return [item async for item in items]


async def test_sse_data_of_each_event_comments_and_other_fields_ignored() -> None:
    stream = [
        ": keep-alive",
        "event: message",
        'data: {"a": 1}',
        "",
        "data:first",
        "data: second",
        "id: 7",
        "",
        "",
        "data: [DONE]",
    ]  # the last event has no blank line after it: still delivered

    assert await collect(event_data(lines(stream))) == ['{"a": 1}', "first\nsecond", "[DONE]"]


def chunk(content: str | None = None, **extra: Any) -> str:
    choices = [] if content is None else [{"index": 0, "delta": {"content": content}}]
    return json.dumps({"model": "m-1", "choices": choices, **extra})


async def test_chunks_are_joined_deltas_forwarded_and_usage_taken_from_the_last() -> None:
    seen: list[str] = []
    events = [
        chunk('{"a"'),
        chunk(": 1}"),
        chunk(None, usage={"prompt_tokens": 11, "completion_tokens": 3}),
        "[DONE]",
        chunk("after the end is ignored"),
    ]

    answer = await read_stream(lines(events), seen.append)

    assert seen == ['{"a"', ": 1}"]
    assert answer.text == '{"a": 1}' and answer.model == "m-1"
    assert answer.usage == {"prompt_tokens": 11, "completion_tokens": 3}


@pytest.mark.parametrize(
    ("events", "code"),
    [
        (["not json"], "VALIDATION_OUTPUT_MALFORMED"),
        (["[1, 2]"], "VALIDATION_OUTPUT_MALFORMED"),
        ([], "VALIDATION_OUTPUT_MALFORMED"),
        ([chunk("{"), json.dumps({"error": {"message": "overloaded"}})], "PROVIDER_UNAVAILABLE"),
    ],
    ids=["not-json", "not-an-object", "empty", "error-event"],
)
async def test_a_broken_stream_is_an_error_that_does_not_echo_it(
    events: list[str], code: str
) -> None:
    with pytest.raises(ExecutionError) as raised:
        await read_stream(lines(events), lambda _: None)

    assert raised.value.code == code
    assert "overloaded" not in str(raised.value)


def feynman_request() -> ProviderRequest:
    rendered = feynman.PROMPT.render(
        {"title": "Photosynthesis", "content": "Light to sugar.", "explanation": "Plants eat."}
    )
    return ProviderRequest(
        model="fake-primary",
        messages=rendered.messages,
        prompt_key=rendered.key,
        prompt_version=rendered.version,
        variables=rendered.variables,
    )


async def test_the_fake_provider_streams_its_answer_in_pieces_that_join_to_it() -> None:
    pieces: list[str] = []
    provider = FakeProvider(FakeSettings(stream_chunks=5))

    response = await provider.generate(feynman_request(), on_delta=pieces.append)

    assert len(pieces) == 5 and "".join(pieces) == response.text
    assert response.text == (await FakeProvider().generate(feynman_request())).text
    assert chunked("abcdefg", 3) == ["abc", "def", "g"] and chunked("ab", 5) == ["a", "b"]


class Published:
    def __init__(self) -> None:
        self.messages: list[tuple[str, pb.PartialOutput, float]] = []
        self.fail_first = 0

    async def __call__(self, subject: str, data: bytes) -> None:
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("nats is gone")
        loop = asyncio.get_running_loop()
        self.messages.append((subject, pb.PartialOutput.FromString(data), loop.time()))

    @property
    def texts(self) -> list[str]:
        return [m.text for _, m, _ in self.messages]


async def test_the_first_delta_leaves_at_once_and_the_rest_are_coalesced() -> None:
    published = Published()
    relay = PartialOutputRelay(published, interval_s=0.2)

    with relay.stream(JOB, attempt=2, call=1) as stream:
        stream.add("Hel")
        await eventually(lambda: len(published.messages) == 1, timeout=1)
        for piece in ("lo", ", ", "wor"):
            stream.add(piece)  # within the interval: held back together
        assert len(published.messages) == 1
        await eventually(lambda: len(published.messages) == 2, timeout=2)
        stream.add("ld")  # pending when the call ends: published on leaving

    await eventually(lambda: published.texts == ["Hel", "lo, wor", "ld"], timeout=1)
    subjects = {s for s, _, _ in published.messages}
    assert subjects == {partial_subject(JOB)} == {f"jobs.partial.{JOB}"}
    messages = [m for _, m, _ in published.messages]
    assert [(m.seq, m.offset) for m in messages] == [(1, 0), (2, 3), (3, 10)]
    assert {(m.attempt, m.call) for m in messages} == {(2, 1)}
    # the second message waited for the interval after the first, not much longer
    first_at, second_at = published.messages[0][2], published.messages[1][2]
    assert 0.15 <= second_at - first_at < 1.5


async def test_a_cancelled_call_drops_what_is_pending() -> None:
    published = Published()
    stream = PartialOutputRelay(published, interval_s=10).stream(JOB, attempt=1, call=1)

    with pytest.raises(asyncio.CancelledError), stream:
        stream.add("one")
        stream.add("two")  # waits for the (long) interval
        raise asyncio.CancelledError

    await eventually(lambda: published.texts == ["one"], timeout=1)
    stream.add("three")  # a late delta after the end goes nowhere
    assert published.texts == ["one"]


async def test_a_failed_publish_never_fails_the_call_and_leaves_a_gap_in_seq() -> None:
    published = Published()
    published.fail_first = 1
    relay = PartialOutputRelay(published, interval_s=0)

    with relay.stream(JOB, attempt=1, call=1) as stream:
        stream.add("lost")
        stream.add("kept")

    await eventually(lambda: published.messages, timeout=1)
    assert [(m.seq, m.text) for _, m, _ in published.messages] == [(2, "kept")]


async def test_the_gateway_streams_each_call_of_an_attempt_under_its_own_number() -> None:
    published = Published()
    router = ModelRouter(
        {tier: Route(FakeProvider(FakeSettings(stream_chunks=3)), "m") for tier in ModelTier},
        PriceTable({}),
    )
    gateway = ModelGateway(router, partials=PartialOutputRelay(published, interval_s=0))
    rendered = feynman.PROMPT.render(
        {"title": "Photosynthesis", "content": "Light to sugar.", "explanation": "Plants eat."}
    )
    usage: list[UsageRecord] = []

    first = await gateway.generate(ModelTier.PRIMARY, rendered, usage, job=(JOB, 3))
    second = await gateway.generate(ModelTier.PRIMARY, rendered, usage, job=(JOB, 3))
    await gateway.generate(ModelTier.PRIMARY, rendered, usage)  # not for a job: not relayed

    await eventually(lambda: len(published.messages) == 6, timeout=1)
    by_call = {
        call: "".join(m.text for _, m, _ in published.messages if m.call == call) for call in (1, 2)
    }
    assert by_call == {1: first.text, 2: second.text}
    assert {m.attempt for _, m, _ in published.messages} == {3}
    assert len(usage) == 3 and not any(u.error_code for u in usage)
