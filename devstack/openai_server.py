"""A local server speaking the OpenAI chat-completions protocol, for tests, the devstack and
chaos runs: the real HTTP provider talks to it exactly as it would to a hosted API.

By default it answers like the fake provider (the prompt is recognised by its system
message, its variables read from the user message), so whole job flows run against it.
Tests script what comes next — a status, a body, a delay, Retry-After — and read what it
saw (requests with their headers, clients that hung up mid-request)::

    async with LocalOpenAIServer(api_key="sk-test") as server:
        server.script(Reply(status=429, headers={"Retry-After": "3"}))
        ...  # point OpenAICompatibleProvider at server.url

Standalone: ``python -m devstack.openai_server --port 8089 [--api-key KEY]
[--delay-ms N] [--stream-interval-ms N]``, then ``JOBS_MODEL_PRIMARY_PROVIDER=openai
JOBS_MODEL_PRIMARY_BASE_URL=http://127.0.0.1:8089/v1`` (same for CHEAP).

A request with ``"stream": true`` is answered with server-sent events, as OpenAI streams:
the content in pieces of ``stream_chunk_chars`` characters, one every ``stream_interval_s``
(0 by default: at once, so a streamed answer takes as long as a whole one; 0.05 is 20 a
second), then a chunk with the usage and ``[DONE]``. Each piece's send
time is kept (``sent``), and a client hanging up mid-stream counts as a disconnect and stops
the stream, as a provider stops generating.

Plain asyncio HTTP/1.1 (keep-alive, Content-Length or chunked bodies): enough for httpx, no
more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.ai.prompts import find_by_system_text, variables_in
from shared.lifetime import Lifetime
from worker_service.adapters.fake_provider import estimate_tokens

Responder = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``body`` None: the responder's answer; a str is sent as is
    (to send malformed JSON)."""

    status: int = 200
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    # The answer waits for this to be set: a test's go-ahead once it is ready to observe.
    held_until: asyncio.Event | None = None


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    # When the request arrived (time.time()), for checks of request rates.
    at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class SentPiece:
    """One streamed content piece, and when it was written to the socket (time.time())."""

    text: str
    at: float


def completion(content: str, model: str, prompt_tokens: int = 0) -> dict[str, Any]:
    """A chat-completion body carrying ``content``."""
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": estimate_tokens(content),
            "total_tokens": prompt_tokens + estimate_tokens(content),
        },
    }


def fake_responder(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Answers a registered prompt with its template's fake answer, as JSON content."""
    messages = body.get("messages") or []
    system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
    user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
    template = find_by_system_text(system)
    if template is None or template.fake is None:
        return 400, {"error": {"message": "unknown prompt", "type": "invalid_request_error"}}
    answer = json.dumps(template.fake(variables_in(user)), ensure_ascii=False)
    prompt_tokens = sum(estimate_tokens(str(m.get("content", ""))) for m in messages)
    return 200, completion(answer, str(body.get("model", "")), prompt_tokens)


class LocalOpenAIServer(Lifetime):
    def __init__(
        self,
        responder: Responder = fake_responder,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        delay_s: float = 0.0,
        stream_interval_s: float = 0.0,
        stream_chunk_chars: int = 8,
    ) -> None:
        self.responder = responder
        self.host = host
        self.port = port
        self.api_key = api_key
        # Every answer waits this long unless its scripted reply says otherwise.
        self.delay_s = delay_s
        self.stream_interval_s = stream_interval_s
        self.stream_chunk_chars = stream_chunk_chars
        self.requests: list[SeenRequest] = []
        # Content pieces streamed, in order, over all requests.
        self.sent: list[SentPiece] = []
        # Requests whose client hung up before the answer (a cancelled call).
        self.disconnects = 0
        # Connections accepted (a client that reuses its connections opens one).
        self.connections = 0
        self.disconnected = asyncio.Event()
        self._script: deque[Reply] = deque()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these, in order; then as usual again."""
        self._script.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                self.requests.append(request)
                reply = self._script.popleft() if self._script else Reply(delay_s=self.delay_s)
                if reply.held_until is not None:
                    await reply.held_until.wait()
                if reply.delay_s and await _hung_up_within(reader, reply.delay_s):
                    self.disconnects += 1
                    self.disconnected.set()
                    return
                status, headers, payload = self._answer(request, reply)
                if status == 200 and request.body.get("stream") is True and reply.body is None:
                    if not await self._stream(reader, writer, json.loads(payload)):
                        self.disconnects += 1
                        self.disconnected.set()
                        return
                    continue
                writer.write(_response(status, headers, payload))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    async def _stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: dict[str, Any]
    ) -> bool:
        """Streams the completion ``body`` as chat-completion chunks (a chunked HTTP body);
        False when the client hung up first."""
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n"
        )
        content = body["choices"][0]["message"]["content"]
        size = max(1, self.stream_chunk_chars)
        pieces = [content[i : i + size] for i in range(0, len(content), size)]
        base = {"id": body["id"], "object": "chat.completion.chunk", "model": body["model"]}
        for number, piece in enumerate(pieces):
            pause = self.stream_interval_s
            if number and pause and await _hung_up_within(reader, pause):
                return False
            delta = {"role": "assistant", "content": piece} if number == 0 else {"content": piece}
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            writer.write(_event(chunk))
            await writer.drain()
            self.sent.append(SentPiece(piece, time.time()))
        done = {"index": 0, "delta": {}, "finish_reason": "stop"}
        writer.write(_event({**base, "choices": [done]}))
        writer.write(_event({**base, "choices": [], "usage": body["usage"]}))
        writer.write(_event("[DONE]") + b"0\r\n\r\n")
        await writer.drain()
        return True

    def _answer(self, request: SeenRequest, reply: Reply) -> tuple[int, dict[str, str], bytes]:
        if self.api_key is not None and request.headers.get("authorization") != (
            f"Bearer {self.api_key}"
        ):
            body: dict[str, Any] | str = {
                "error": {"message": "invalid api key", "type": "authentication_error"}
            }
            return 401, {}, json.dumps(body).encode()
        if request.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return 404, {}, b'{"error": {"message": "not found"}}'
        status = reply.status
        if reply.body is not None:
            body = reply.body
        elif status == 200:
            status, body = self.responder(request.body)
        else:
            body = {"error": {"message": f"scripted {status}", "type": "server_error"}}
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return status, reply.headers, data


async def _read_request(reader: asyncio.StreamReader) -> SeenRequest | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    try:
        body = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        body = {}
    return SeenRequest(method, path, headers, body if isinstance(body, dict) else {})


async def _hung_up_within(reader: asyncio.StreamReader, delay_s: float) -> bool:
    """Waits ``delay_s``; True as soon as the client closes its side instead."""
    read = asyncio.ensure_future(reader.read(1))
    done, _ = await asyncio.wait({read}, timeout=delay_s)
    if not done:
        read.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await read
        return False
    try:
        return read.result() == b""
    except ConnectionError:
        return True


def _event(data: dict[str, Any] | str) -> bytes:
    """One server-sent event as one HTTP chunk."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    event = f"data: {text}\n\n".encode()
    return f"{len(event):x}\r\n".encode() + event + b"\r\n"


def _response(status: int, headers: dict[str, str], payload: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    all_headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(payload)),
        **headers,
    }
    lines += [f"{k}: {v}" for k, v in all_headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


async def _main(args: argparse.Namespace) -> None:
    from shared.registry import default_registry

    default_registry()  # imports the job types, which register their prompts
    server = LocalOpenAIServer(
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        delay_s=args.delay_ms / 1000,
        stream_interval_s=args.stream_interval_ms / 1000,
    )
    await server.start()
    print(f"OpenAI-compatible server on {server.url}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--delay-ms", type=int, default=0)
    parser.add_argument(
        "--stream-interval-ms", type=int, default=0, help="between streamed chunks (50: 20/s)"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
