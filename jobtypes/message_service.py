"""A fake external service for the ``approval_agent`` example: it sends messages, and
applies each idempotency key once, as a payment or mail API that deduplicates by key does.

    POST /messages   header ``Idempotency-Key``, body ``{"to", "subject", "body"}``:
                     the first call with a key applies it (the next message id) and
                     answers its receipt ``{"message_id", "idempotency_key"}``; a later
                     call with the same key applies nothing and answers the same receipt
    GET /messages    what it saw: ``{"calls": {key: calls}, "sent": [message, ...]}``

It keeps everything in memory and counts every call per key, the repeats included: a
worker killed after its call and before recording the step calls again with the same key,
which shows here as two calls and one message.

Standalone (the example in docs/job-types.md): ``python -m jobtypes.message_service
[--port 8090]``; the worker reaches it at ``JOBS_MESSAGE_SERVICE_URL`` (``approval_agent``'s
default: http://127.0.0.1:8090). In a test: ``with MessageService() as service:``
(``service.url``, a free port), and ``on_apply`` to act between an effect and its answer.

Plain ``http.server`` on a thread: a fake needs no framework.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_PORT = 8090
PATH = "/messages"
MAX_BODY_BYTES = 64 * 1024
FIELDS = ("to", "subject", "body")


class MessageService:
    """The fake service on 127.0.0.1:``port`` (0: a free one), served from a thread
    between ``start()`` and ``stop()`` (or ``with``)."""

    def __init__(
        self,
        port: int = 0,
        *,
        on_apply: Callable[[str], None] | None = None,
        on_call: Callable[[str, bool], None] | None = None,
    ) -> None:
        # on_apply(key): called once a key is applied, before its receipt is sent
        # on_call(key, applied): called after every call, with whether it applied the key
        self._on_apply = on_apply
        self._on_call = on_call
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._receipts: dict[str, dict[str, str]] = {}
        self._sent: list[dict[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def calls(self) -> dict[str, int]:
        """Calls per idempotency key, repeats included."""
        with self._lock:
            return dict(self._calls)

    @property
    def sent(self) -> list[dict[str, str]]:
        """The messages applied, in order, each with its message id and key."""
        with self._lock:
            return [dict(m) for m in self._sent]

    def send(self, key: str, message: dict[str, str]) -> dict[str, str]:
        """One call: the receipt of ``key``, applying it (sending the message) only if no
        call has yet."""
        with self._lock:
            self._calls[key] = self._calls.get(key, 0) + 1
            receipt = self._receipts.get(key)
            applied = receipt is None
            if receipt is None:
                receipt = {"message_id": f"msg-{len(self._sent) + 1}", "idempotency_key": key}
                self._receipts[key] = receipt
                self._sent.append({**receipt, **message})
        if applied and self._on_apply is not None:
            self._on_apply(key)
        if self._on_call is not None:
            self._on_call(key, applied)
        return receipt

    def run(self) -> None:
        """Serves in this thread until ``stop()`` (from another) or Ctrl-C."""
        with contextlib.suppress(KeyboardInterrupt):
            self._server.serve_forever()

    def start(self) -> MessageService:
        """Serves from a thread of its own."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="message-service", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._server.shutdown()
            thread.join()
        self._server.server_close()

    def __enter__(self) -> MessageService:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _handler(service: MessageService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != PATH:
                return self._answer(HTTPStatus.NOT_FOUND, {"error": "no such path"})
            self._answer(HTTPStatus.OK, {"calls": service.calls, "sent": service.sent})

        def do_POST(self) -> None:
            if self.path != PATH:
                return self._answer(HTTPStatus.NOT_FOUND, {"error": "no such path"})
            key = self.headers.get("Idempotency-Key", "")
            message = self._message()
            if not key or message is None:
                return self._answer(
                    HTTPStatus.BAD_REQUEST,
                    {"error": "an Idempotency-Key header and a JSON body {to, subject, body}"},
                )
            self._answer(HTTPStatus.OK, service.send(key, message))

        def _message(self) -> dict[str, str] | None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return None
            if not 0 < length <= MAX_BODY_BYTES:
                return None
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                return None
            if not isinstance(body, dict) or not all(isinstance(body.get(f), str) for f in FIELDS):
                return None
            return {f: body[f] for f in FIELDS}

        def _answer(self, status: HTTPStatus, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the caller is gone (a test killed it after the effect)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the standalone server prints one line per call (on_call) instead

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    port = parser.parse_args().port

    def said(key: str, applied: bool) -> None:
        outcome = "applied" if applied else "already applied: the same receipt, nothing sent"
        print(f"POST {PATH} {key}: call {service.calls[key]}, {outcome}", flush=True)

    service = MessageService(port, on_call=said)
    print(f"message service on {service.url}{PATH} (Ctrl-C stops it)", flush=True)
    try:
        service.run()
    finally:
        service.stop()


if __name__ == "__main__":
    main()
