"""Publishing to NATS: outbox messages to JetStream, cancel notices to core NATS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from nats.aio.client import Client as NATS

from job_service.adapters.outbox_store import OutboxMessage
from shared.constants import CANCEL_SUBJECT, MSG_ID_HEADER

PUBLISH_TIMEOUT_S = 5.0


class NatsPublisher:
    def __init__(self, nc: NATS, *, publish_timeout_s: float = PUBLISH_TIMEOUT_S) -> None:
        self._nc = nc
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
        once."""
        results = await asyncio.gather(
            *(
                self._js.publish(
                    m.subject,
                    json.dumps(m.payload).encode(),
                    timeout=self._timeout_s,
                    headers={MSG_ID_HEADER: m.dedupe_key},
                )
                for m in messages
            ),
            return_exceptions=True,
        )
        return [
            f"{type(r).__name__}: {r}" if isinstance(r, BaseException) else None for r in results
        ]

    async def notify_cancel(self, job_id: str) -> None:
        """Best effort: a worker running the job stops at once. Heartbeats are the
        durable backstop when this notice is lost."""
        await self._nc.publish(CANCEL_SUBJECT, json.dumps({"job_id": job_id}).encode())
