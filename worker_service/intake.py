"""Intake: one queue's dispatch messages, turned into locked attempts; and the jobs granted
to this worker without a message (pushed down its session, or answered with its results:
ADR 0009), run in the same slots.

A dispatch message is a work token for its queue, never a decision: LockJobs grants the
queue's best eligible jobs by the job service's scheduling policy, up to one per message —
not necessarily the jobs the messages name.
Each fetched batch is locked with one LockJobs call (a gRPC call costs the job service more
than the locking itself), then every message is settled on its own answer as soon as the
call returns, so JetStream redelivery never acts as a retry; only the job service retries,
with a new dispatch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from shared import tracing
from worker_service import metrics, stage_times
from worker_service.domain.errors import DispatchUnavailable, ExecutorCallFailed, is_transient
from worker_service.domain.model import (
    LockedJob,
    LockOutcome,
    LockResult,
    nak_delay,
    parse_dispatch,
)
from worker_service.pipeline import Pipeline
from worker_service.ports import MAX_BATCH, Delivery, DispatchSource, ExecutorApi

log = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 5.0
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
# Redelivery delays for a dispatch whose lock failed: an outage, or a refusal (a bug).
UNREACHABLE_NAK_DELAY_S = 1.0
REFUSED_NAK_DELAY_S = 5.0
FETCH_RETRY_S = 0.5


class QueueIntake:
    """Fetches one queue's dispatch messages and hands each to the pipeline, holding at
    most ``slots`` messages at once: it fetches only as many as there are free slots, so
    messages never wait in this process while others could run them. A message holds its
    slot until it is settled without running, or until its job's attempt has finished: one
    task per message does that, so ``tasks`` is the in-flight work.
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
        runnable: Sequence[str] = (),
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
        self._runnable = list(runnable)
        self._start_after: asyncio.Event | None = None
        self._free = slots
        # The queue looked backed up: the last fetch came back full, or the last results
        # were answered with every job they asked for. Only then do results ask for jobs
        # (lock on submit, ADR 0009): with none waiting, a job just created is the push's
        # to deliver, and results that took it first would leave its dispatch message to
        # be published, fetched and locked for nothing.
        self._backlog = False
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._slots_changed: Callable[[], None] = _nothing
        self.tasks: set[asyncio.Task[None]] = set()
        metrics.watch_slots(queue, slots, lambda: self.slots - self._free)

    @property
    def free(self) -> int:
        """Slots no job holds (0 while stopping: nothing new is wanted)."""
        return 0 if self._stopping.is_set() else max(0, self._free)

    def start_after(self, event: asyncio.Event) -> None:
        """Take no lease before ``event`` is set (the worker's first session is registered:
        a lease taken before would be ended by it, as the previous process's)."""
        self._start_after = event

    def on_slots_changed(self, callback: Callable[[], None]) -> None:
        """``callback()`` whenever ``free`` may have changed."""
        self._slots_changed = callback

    def take(self, job: LockedJob) -> None:
        """Runs a job granted without a dispatch message in a slot of this queue. The job
        service grants no more than the slots the worker said were free; a job that
        arrives anyway (a slot handed on by a result it was granted with) runs all the
        same, the queue briefly over its slots. A stopping intake runs it too: the pipeline
        then hands it back at once."""
        self._free -= 1
        task = asyncio.create_task(self._run_granted(job), name=f"granted-{self.queue}")
        self.tasks.add(task)
        task.add_done_callback(self._finished)
        self._slots_changed()

    def wanted_with_results(self, finishing: int) -> int:
        """How many jobs to ask for with ``finishing`` results of this queue (lock on
        submit): the slots those results free while the queue looks backed up; none while
        it does not, or while stopping."""
        return finishing if self._backlog and not self._stopping.is_set() else 0

    def granted_with_results(self, asked: int, granted: int) -> None:
        """Results asked for ``asked`` jobs of this queue and were granted ``granted``:
        fewer means the queue ran dry."""
        self._backlog = granted >= asked

    async def run(self) -> None:
        """Fetch and dispatch until stopped. Ends after the fetch in progress, whose
        messages are handed back (nak) at once."""
        if self._start_after is not None:
            await _first_of(self._start_after, self._stopping)
        while await self._slot_free():
            batch = min(self._free, self._fetch_batch)
            try:
                deliveries = await self._source.fetch(self.queue, batch, self._fetch_timeout_s)
                self._backlog = len(deliveries) >= batch
            except DispatchUnavailable as exc:
                log.warning("queue %s: cannot fetch dispatch messages (%s)", self.queue, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), FETCH_RETRY_S)
                continue
            if self._stopping.is_set():
                for delivery in deliveries:
                    await _nak(delivery, None)
                continue
            # No await from the stop check to the tasks' creation: a stopped intake starts
            # nothing new, so the worker's drain sees every in-flight task.
            dispatches, malformed = self._parse(deliveries)
            for start in range(0, len(dispatches), MAX_BATCH):
                self._start(dispatches[start : start + MAX_BATCH])
            for delivery in malformed:
                await _ack(delivery)

    def stop(self) -> None:
        """Stop fetching; messages already taken run to completion. Idempotent."""
        self._stopping.set()
        self._wake.set()
        self._slots_changed()

    async def _slot_free(self) -> bool:
        while self._free <= 0 and not self._stopping.is_set():
            self._wake.clear()
            await self._wake.wait()
        return not self._stopping.is_set()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._free += 1
        self._wake.set()
        self._slots_changed()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("queue %s: dispatch handler failed", self.queue, exc_info=exc)

    def _parse(
        self, deliveries: Sequence[Delivery]
    ) -> tuple[list[tuple[Delivery, str]], list[Delivery]]:
        """The messages with the job id each names, and the malformed ones (to drop)."""
        dispatches, malformed = [], []
        for delivery in deliveries:
            try:
                dispatches.append((delivery, parse_dispatch(delivery.data).job_id))
            except ValueError as exc:
                log.warning("queue %s: dropping a malformed dispatch message (%s)", self.queue, exc)
                malformed.append(delivery)
        return dispatches, malformed

    def _start(self, dispatches: list[tuple[Delivery, str]]) -> None:
        """One LockJobs call for these messages, and per message a task that takes a slot,
        waits for its own answer, settles the message and runs the job."""
        job_ids = [job_id for _, job_id in dispatches]
        locking = asyncio.create_task(self._lock(job_ids), name=f"lock-{self.queue}")
        for index, (delivery, job_id) in enumerate(dispatches):
            self._free -= 1
            task = asyncio.create_task(
                self._handle(delivery, job_id, locking, index), name=f"dispatch-{self.queue}"
            )
            self.tasks.add(task)
            task.add_done_callback(self._finished)
        self._slots_changed()

    async def _run_granted(self, job: LockedJob) -> None:
        with tracing.span(
            "job",
            kind=tracing.CONSUMER,
            attributes={"jobs.job_id": job.job_id, "jobs.queue": self.queue},
        ):
            await self._pipeline.run(job)

    async def _lock(self, job_ids: list[str]) -> list[LockResult | Exception]:
        """Per job id, its answer: a failed call is every job's answer."""
        try:
            answers = await self._executor.lock_jobs(
                job_ids,
                self._worker_id,
                timeout_s=LOCK_TIMEOUT_S,
                queue=self.queue,
                runnable=self._runnable,
            )
            if len(answers) != len(job_ids):
                raise ExecutorCallFailed(f"LockJobs answered {len(answers)} of {len(job_ids)}")
        except Exception as exc:
            log.log(
                logging.INFO if is_transient(exc) else logging.ERROR,
                "queue %s: LockJobs for %d dispatches failed (%s); handing them back",
                self.queue,
                len(job_ids),
                type(exc).__name__,
            )
            return [exc] * len(job_ids)
        for job_id, answer in zip(job_ids, answers, strict=True):
            if isinstance(answer, Exception):
                log.error(
                    "job %s: LockJobs failed for it (%s); dispatch handed back",
                    job_id,
                    type(answer).__name__,
                )
        return list(answers)

    async def _handle(
        self,
        delivery: Delivery,
        job_id: str,
        locking: asyncio.Task[list[LockResult | Exception]],
        index: int,
    ) -> None:
        with tracing.span(
            "job",
            parent=_trace_context(delivery),
            kind=tracing.CONSUMER,
            attributes={"jobs.job_id": job_id, "jobs.queue": self.queue},
        ):
            with tracing.span("LockJob", kind=tracing.CLIENT):
                # Shielded: the call answers the whole batch, so one handler's cancellation
                # must not cancel it for the others.
                lock = (await asyncio.shield(locking))[index]
            await self._settle(delivery, job_id, lock)

    async def _settle(self, delivery: Delivery, job_id: str, lock: LockResult | Exception) -> None:
        if isinstance(lock, Exception):
            await _nak(
                delivery, UNREACHABLE_NAK_DELAY_S if is_transient(lock) else REFUSED_NAK_DELAY_S
            )
        elif lock.outcome is LockOutcome.LOCKED and lock.job is not None:
            stage_times.mark((lock.job.job_id,), "locked")
            await _ack(delivery)
            await self._pipeline.run(lock.job)
        elif lock.outcome is LockOutcome.NOT_DUE:
            await _nak(delivery, nak_delay(lock.retry_after, self._wall_clock()))
        else:
            # Finished, cancelled, running elsewhere, or a duplicate of a dispatch already
            # served: drop it.
            log.debug("job %s: unavailable, dispatch dropped", job_id)
            await _ack(delivery)


def _nothing() -> None:
    pass


def _trace_context(delivery: Delivery) -> dict[str, str] | None:
    """The trace context the job service sent in the message headers (tracing on)."""
    if not tracing.enabled():
        return None
    headers = getattr(delivery, "headers", None) or {}
    found = {k: v for k, v in headers.items() if k in TRACE_HEADERS}
    return found or None


async def _ack(delivery: Delivery) -> None:
    try:
        await delivery.ack()
    except Exception as exc:  # the message comes back after ack_wait; locking dedups it
        log.warning("cannot ack a dispatch message (%s)", type(exc).__name__)


async def _nak(delivery: Delivery, delay: float | None) -> None:
    try:
        await delivery.nak(delay)
    except Exception as exc:  # the message comes back after ack_wait anyway
        log.warning("cannot nak a dispatch message (%s)", type(exc).__name__)


async def _first_of(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
