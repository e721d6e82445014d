"""NATS adapters: the JetStream dispatch consumer (a DispatchSource) and the core-NATS
cancel and signal listeners."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError, ServiceUnavailableError

from shared.constants import (
    CANCEL_SUBJECT,
    DISPATCH_STREAM,
    SIGNAL_SUBJECT,
    dispatch_consumer,
    dispatch_subject,
)
from shared.jetstream import ensure_dispatch_consumer, ensure_streams
from shared.lifetime import Lifetime
from worker_service.domain.errors import DispatchUnavailable
from worker_service.domain.model import parse_cancel, parse_signal_notice
from worker_service.ports import Delivery

log = logging.getLogger(__name__)


class NatsDispatchSource:
    """Pull subscriptions on the durable per-queue consumers every worker shares."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._subs: dict[str, JetStreamContext.PullSubscription] = {}

    async def subscribe(self, queues: Iterable[str]) -> None:
        """Declare the topology and bind one pull subscription per queue; idempotent, so a
        call cut off half-way (a cluster still electing) can be made again."""
        await ensure_streams(self._js)
        for queue in queues:
            if queue in self._subs:
                continue
            await ensure_dispatch_consumer(self._js, queue)
            self._subs[queue] = await self._js.pull_subscribe(
                dispatch_subject(queue), durable=dispatch_consumer(queue), stream=DISPATCH_STREAM
            )

    async def fetch(self, queue: str, batch: int, wait_s: float) -> Sequence[Delivery]:
        try:
            return await self._subs[queue].fetch(batch, timeout=wait_s)
        except TimeoutError:
            # Nothing to do: the normal idle case. nats-py raises its own TimeoutError or,
            # when the server's answer to its no-wait probe comes late, asyncio's (2.16).
            return []
        except (ServiceUnavailableError, NotFoundError) as exc:
            # No one answers for the consumer: the server lost its store (or someone deleted
            # the stream). Declare it all again, or fetches would fail forever.
            await self._declare(queue)
            raise DispatchUnavailable(f"{type(exc).__name__}: {exc}") from exc
        except nats.errors.Error as exc:
            raise DispatchUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def declare_again(self) -> None:
        """Declare the stream and every queue's consumer again (after a reconnect: the
        server may have lost its store). Subscriptions stay: a pull request names the
        consumer, so it reaches the new one."""
        for queue in list(self._subs):
            await self._declare(queue, quiet=True)

    async def _declare(self, queue: str, *, quiet: bool = False) -> None:
        try:
            await ensure_streams(self._js)
            await ensure_dispatch_consumer(self._js, queue)
        except (nats.errors.Error, TimeoutError) as exc:
            log.warning("queue %s: cannot declare its consumer (%s)", queue, type(exc).__name__)
            return
        log.log(
            logging.INFO if quiet else logging.WARNING,
            "queue %s: dispatch consumer declared again",
            queue,
        )

    async def close(self) -> None:
        """Drop the pull subscriptions; the durable consumers stay for the next worker."""
        subs, self._subs = list(self._subs.values()), {}
        for sub in subs:
            try:
                await sub.unsubscribe()
            except nats.errors.Error as exc:
                log.debug("unsubscribe failed (%s)", type(exc).__name__)


class _ControlListener(Lifetime):
    """A subscription to one core-NATS control subject (``subject``) for as long as it is
    entered; ``_received`` handles each message. Use as ``async with``; ``stop()`` is
    idempotent."""

    subject: str

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._sub: Subscription | None = None

    async def start(self) -> None:
        if self._sub is None:
            self._sub = await self._nc.subscribe(self.subject, cb=self._received)
            # The subscription is live on the server once flush returns: no message is
            # missed from here on.
            await self._nc.flush()

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None and not self._nc.is_closed:
            try:
                await sub.unsubscribe()
            except nats.errors.Error as exc:
                log.debug("unsubscribe failed (%s)", type(exc).__name__)

    async def _received(self, msg: Msg) -> None:
        raise NotImplementedError


class CancelListener(_ControlListener):
    """Hears "stop job X now" on core NATS and calls ``on_cancel(job_id)`` at once.

    Cancel messages are not persisted: a worker that misses one learns of the cancel from
    its next heartbeat."""

    subject = CANCEL_SUBJECT

    def __init__(self, nc: Client, on_cancel: Callable[[str], object]) -> None:
        super().__init__(nc)
        self._on_cancel = on_cancel

    async def _received(self, msg: Msg) -> None:
        try:
            job_id = parse_cancel(msg.data)
        except ValueError as exc:
            log.warning("ignoring a malformed cancel message (%s)", exc)
            return
        if self._on_cancel(job_id):
            log.info("job %s: cancelled by a cancel message", job_id)


class SignalListener(_ControlListener):
    """Hears "job X has signals up to seq N" on core NATS and calls
    ``on_signal(job_id, seq)``: the job's attempt, if it runs here, fetches them at once.

    Not persisted either: heartbeats carry the latest seq as the backstop."""

    subject = SIGNAL_SUBJECT

    def __init__(self, nc: Client, on_signal: Callable[[str, int], object]) -> None:
        super().__init__(nc)
        self._on_signal = on_signal

    async def _received(self, msg: Msg) -> None:
        try:
            job_id, seq = parse_signal_notice(msg.data)
        except ValueError as exc:
            log.warning("ignoring a malformed signal notice (%s)", exc)
            return
        self._on_signal(job_id, seq)
