"""The partial-output feed on core NATS: one subscription to ``jobs.partial.<job_id>`` per
watcher that asked for partial output, for as long as it watches. Pieces are passed on as
they are (never parsed, stored or logged here)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from job_service.ports.partials import PieceSink
from shared.constants import partial_subject

log = logging.getLogger(__name__)

# Pieces the client library may hold for one slow watcher before it drops (the watcher sees
# a gap in seq); at 20 pieces a second that is many seconds of text.
PENDING_MESSAGES = 1000
# How long a new subscription may take to become live before the watch goes on without it.
FLUSH_TIMEOUT_S = 2


class NatsPartialOutputFeed:
    def __init__(self, nc: Client) -> None:
        self._nc = nc

    @contextlib.asynccontextmanager
    async def subscribe(self, job_id: str, deliver: PieceSink) -> AsyncIterator[None]:
        async def received(msg: Msg) -> None:
            deliver(msg.data)

        sub: Subscription | None = None
        try:
            sub = await self._nc.subscribe(
                partial_subject(job_id), cb=received, pending_msgs_limit=PENDING_MESSAGES
            )
            # live on the server once flush returns: nothing published from here is missed
            await self._nc.flush(timeout=FLUSH_TIMEOUT_S)
        except (nats.errors.Error, TimeoutError) as exc:
            # best effort: the watch goes on with the job's states only
            log.warning("partial output unavailable for a watch (%s)", type(exc).__name__)
        try:
            yield
        finally:
            if sub is not None and not self._nc.is_closed:
                try:
                    await sub.unsubscribe()
                except nats.errors.Error as exc:
                    log.debug("unsubscribe failed (%s)", type(exc).__name__)
