"""Publishing to NATS: outbox messages to JetStream, cancel and signal notices to core NATS."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from nats.aio.client import Client as NATS
from nats.js.errors import NoStreamResponseError
from opentelemetry.trace import Span

from job_service.domain.outbox import OutboxMessage
from shared import tracing
from shared.constants import CANCEL_SUBJECT, MSG_ID_HEADER, SIGNAL_SUBJECT
from shared.jetstream import ensure_streams

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT_S = 5.0


class NatsPublisher:
    def __init__(
        self, nc: NATS, *, publish_timeout_s: float = PUBLISH_TIMEOUT_S, stream_replicas: int = 1
    ) -> None:
        self._nc = nc
        self._replicas = stream_replicas
        self._js = nc.jetstream()
        self._timeout_s = publish_timeout_s

    @property
    def connected(self) -> bool:
        """False while the client is (re)connecting: failures then say nothing about the
        messages themselves."""
        return bool(self._nc.is_connected)

    async def publish_batch(self, messages: Sequence[OutboxMessage]) -> list[str | None]:
        """Publishes every message at once (pipelined) and waits for each stream ack.
        Returns, per message, None when stored or the error text. The dedupe key is the
        Nats-Msg-Id, so a message published twice (a crash before marking it) is stored
        once.

        A server that lost its store (or an operator who deleted a stream) answers "no
        stream": the streams are declared again and those messages published once more,
        so that a NATS data loss does not dead-letter the outbox."""
        results = await self._publish(messages)
        missing = [i for i, r in enumerate(results) if isinstance(r, NoStreamResponseError)]
        if missing:
            log.warning("outbox: no stream for %d messages; declaring the streams", len(missing))
            try:
                await ensure_streams(self._js, self._replicas)
            except Exception as exc:
                log.warning("outbox: cannot declare the streams (%s)", type(exc).__name__)
            else:
                again = await self._publish([messages[i] for i in missing])
                for i, result in zip(missing, again, strict=True):
                    results[i] = result
        return [
            f"{type(r).__name__}: {r}" if isinstance(r, BaseException) else None for r in results
        ]

    async def _publish(self, messages: Sequence[OutboxMessage]) -> list[BaseException | None]:
        """One pipelined round of publishes; per message, None or its exception."""
        spans = [_publish_span(m) for m in messages]
        results = await asyncio.gather(
            *(
                self._js.publish(
                    m.subject,
                    json.dumps(_body(m.payload)).encode(),
                    timeout=self._timeout_s,
                    headers={MSG_ID_HEADER: m.dedupe_key, **(tracing.carrier(span) or {})},
                )
                for m, span in zip(messages, spans, strict=True)
            ),
            return_exceptions=True,
        )
        for span, result in zip(spans, results, strict=True):
            tracing.end_span(span, result if isinstance(result, BaseException) else None)
        return [r if isinstance(r, BaseException) else None for r in results]

    async def notify_cancel(self, job_id: str) -> None:
        """Best effort: a worker running the job stops at once. Heartbeats are the
        durable backstop when this notice is lost."""
        await self._nc.publish(CANCEL_SUBJECT, json.dumps({"job_id": job_id}).encode())

    async def notify_signal(self, job_id: str, seq: int) -> None:
        """Best effort: the worker running the job fetches its signals up to ``seq`` at
        once. Heartbeats carry the latest seq when this notice is lost."""
        await self._nc.publish(SIGNAL_SUBJECT, json.dumps({"job_id": job_id, "seq": seq}).encode())


def _body(payload: dict[str, Any]) -> dict[str, Any]:
    """The message body: the row's payload without its trace context (that goes in the
    headers)."""
    if "trace" not in payload:
        return payload
    return {k: v for k, v in payload.items() if k != "trace"}


def _publish_span(message: OutboxMessage) -> Span | None:
    """A producer span in the trace of the request that wrote the row (when it has one)."""
    parent = message.payload.get("trace")
    if not tracing.enabled() or not isinstance(parent, dict):
        return None
    return tracing.start_span(
        f"publish {message.subject}",
        parent=parent,
        kind=tracing.PRODUCER,
        attributes={"messaging.system": "nats", "messaging.destination.name": message.subject},
    )
