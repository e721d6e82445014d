"""Partial output: the text of a running provider call, relayed to watchers as it arrives.

A streaming provider hands each text delta to the call's ``PartialStream`` (its
``on_delta``). The stream coalesces: the first delta is published at once, so a watcher sees
text as early as possible, later ones together at most once per interval
(``JOBS_PARTIAL_OUTPUT_INTERVAL_MS``, 50 ms by default): at 20-100 deltas a second that is
at most 20 messages a second per job, whatever the model's pace. Each message is a
``jobs.v1.PartialOutput`` on the job's core NATS subject (``partial_subject(job_id)``); the
job service forwards it to the job's watchers (WatchJob with include_partial_output).

Best effort by design: core NATS keeps nothing, so a piece nobody listens to is gone, and a
failed publish drops its piece (its ``seq`` is skipped: watchers see the gap) rather than
slow or fail the job. The job's output, submitted when the attempt ends, is the truth.
The text is never stored and never logged: metrics count messages and bytes only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType

from shared.constants import partial_subject
from shared.pb.jobs.v1 import job_service_pb2 as pb
from worker_service import metrics

log = logging.getLogger(__name__)

# Publishes bytes on a subject (``nats.aio.client.Client.publish``).
Publish = Callable[[str, bytes], Awaitable[None]]


class PartialOutputRelay:
    """Opens a ``PartialStream`` per provider call; holds the publish function and pace."""

    def __init__(self, publish: Publish, interval_s: float = 0.05) -> None:
        self._publish = publish
        self.interval_s = interval_s

    def stream(self, job_id: str, attempt: int, call: int) -> PartialStream:
        return PartialStream(self._publish, job_id, attempt, call, self.interval_s)


class PartialStream:
    """One provider call's text on its way out. ``add`` is the provider's ``on_delta``
    (synchronous, never blocks); ``with`` bounds it: leaving normally publishes what is
    still pending, leaving with an exception (a cancelled or failed call) drops it."""

    def __init__(
        self, publish: Publish, job_id: str, attempt: int, call: int, interval_s: float
    ) -> None:
        self._publish = publish
        self._subject = partial_subject(job_id)
        self._attempt = attempt
        self._call = call
        self._interval_s = interval_s
        self._pending: list[str] = []
        self._seq = 0
        self._offset = 0
        self._last_sent = -float("inf")
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._closed = False

    def add(self, text: str) -> None:
        if self._closed or not text:
            return
        self._pending.append(text)
        if self._timer is not None:
            return  # a send is already due
        wait_s = self._last_sent + self._interval_s - time.monotonic()
        if wait_s <= 0:
            self._send()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait_s, self._send)

    def _send(self) -> None:
        self._timer = None
        message = self._take()
        if message is None:
            return
        self._last_sent = time.monotonic()
        # Tasks start in creation order and nats-py queues a publish before it first yields,
        # so messages leave in seq order.
        task = asyncio.get_running_loop().create_task(self._deliver(message))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def _take(self) -> pb.PartialOutput | None:
        if not self._pending:
            return None
        text = "".join(self._pending)
        self._pending.clear()
        self._seq += 1
        message = pb.PartialOutput(
            text=text, seq=self._seq, attempt=self._attempt, call=self._call, offset=self._offset
        )
        self._offset += len(text)
        return message

    async def _deliver(self, message: pb.PartialOutput) -> None:
        try:
            await self._publish(self._subject, message.SerializeToString())
        except Exception as exc:  # never fails the job: the watcher sees a gap in seq
            metrics.partial_output_dropped()
            log.debug("partial output not published (%s)", type(exc).__name__)
            return
        metrics.partial_output_published(len(message.text.encode()))

    def close(self, *, flush: bool) -> None:
        """Stop; with ``flush``, send what is pending (after the sends under way: see
        ``_send``). Never waits, so nothing here can delay or interrupt the call's ending
        (its usage record included)."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if flush:
            self._send()
        self._pending.clear()

    def __enter__(self) -> PartialStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(flush=exc_type is None)
