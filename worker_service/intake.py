"""Intake: one queue's dispatch messages, turned into locked attempts.

A dispatch message is a hint ("job X may be worked on"), never a decision: LockJob decides.
The message is settled as soon as LockJob answers, so JetStream redelivery never acts as a
retry; only the job service retries, with a new dispatch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from worker_service.domain.errors import DispatchUnavailable, is_transient
from worker_service.domain.model import LockOutcome, nak_delay, parse_dispatch
from worker_service.pipeline import Pipeline
from worker_service.ports import Delivery, DispatchSource, ExecutorApi

log = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 5.0
# Redelivery delays for a dispatch whose LockJob failed: an outage, or a refusal (a bug).
UNREACHABLE_NAK_DELAY_S = 1.0
REFUSED_NAK_DELAY_S = 5.0
FETCH_RETRY_S = 0.5


class QueueIntake:
    """Fetches one queue's dispatch messages and hands each to the pipeline, holding at
    most ``slots`` messages (being locked or running) at once: it fetches only as many as
    there are free slots, so messages never wait in this process while others could run them.
    """

    def __init__(
        self,
        queue: str,
        slots: int,
        *,
        source: DispatchSource,
        executor: ExecutorApi,
        pipeline: Pipeline,
        worker_id: str,
        fetch_batch: int = 32,
        fetch_timeout_s: float = 1.0,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if slots < 1 or fetch_batch < 1:
            raise ValueError("slots and fetch_batch must be at least 1")
        self.queue = queue
        self.slots = slots
        self._source = source
        self._executor = executor
        self._pipeline = pipeline
        self._worker_id = worker_id
        self._fetch_batch = fetch_batch
        self._fetch_timeout_s = fetch_timeout_s
        self._wall_clock = wall_clock
        self._free = slots
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Fetch and dispatch until stopped. Ends after the fetch in progress, whose
        messages are handed back (nak) at once."""
        while await self._slot_free():
            batch = min(self._free, self._fetch_batch)
            try:
                deliveries = await self._source.fetch(self.queue, batch, self._fetch_timeout_s)
            except DispatchUnavailable as exc:
                log.warning("queue %s: cannot fetch dispatch messages (%s)", self.queue, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), FETCH_RETRY_S)
                continue
            for delivery in deliveries:
                if self._stopping.is_set():
                    await _nak(delivery, None)
                    continue
                self._free -= 1
                task = asyncio.create_task(self._handle(delivery), name=f"dispatch-{self.queue}")
                self.tasks.add(task)
                task.add_done_callback(self._finished)

    def stop(self) -> None:
        """Stop fetching; messages already taken run to completion. Idempotent."""
        self._stopping.set()
        self._wake.set()

    async def _slot_free(self) -> bool:
        while self._free <= 0 and not self._stopping.is_set():
            self._wake.clear()
            await self._wake.wait()
        return not self._stopping.is_set()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._free += 1
        self._wake.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("queue %s: dispatch handler failed", self.queue, exc_info=exc)

    async def _handle(self, delivery: Delivery) -> None:
        try:
            dispatch = parse_dispatch(delivery.data)
        except ValueError as exc:
            log.warning("queue %s: dropping a malformed dispatch message (%s)", self.queue, exc)
            await _ack(delivery)
            return
        job_id = dispatch.job_id
        try:
            lock = await self._executor.lock_job(job_id, self._worker_id, timeout_s=LOCK_TIMEOUT_S)
        except Exception as exc:
            transient = is_transient(exc)
            log.log(
                logging.INFO if transient else logging.ERROR,
                "job %s: LockJob failed (%s); dispatch handed back",
                job_id,
                type(exc).__name__,
            )
            await _nak(delivery, UNREACHABLE_NAK_DELAY_S if transient else REFUSED_NAK_DELAY_S)
            return
        if lock.outcome is LockOutcome.LOCKED and lock.job is not None:
            await _ack(delivery)
            await self._pipeline.run(lock.job)
        elif lock.outcome is LockOutcome.NOT_DUE:
            await _nak(delivery, nak_delay(lock.retry_after, self._wall_clock()))
        else:
            # Finished, cancelled, running elsewhere, or a duplicate of a dispatch already
            # served: drop it.
            log.debug("job %s: unavailable, dispatch dropped", job_id)
            await _ack(delivery)


async def _ack(delivery: Delivery) -> None:
    try:
        await delivery.ack()
    except Exception as exc:  # the message comes back after ack_wait; LockJob dedups it
        log.warning("cannot ack a dispatch message (%s)", type(exc).__name__)


async def _nak(delivery: Delivery, delay: float | None) -> None:
    try:
        await delivery.nak(delay)
    except Exception as exc:  # the message comes back after ack_wait anyway
        log.warning("cannot nak a dispatch message (%s)", type(exc).__name__)
