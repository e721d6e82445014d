"""The worker runtime: one intake loop per queue, the result batcher and the session with
the job service under one supervisor, and the shutdown order (stop intake → let in-flight
jobs finish within the grace period → hand the rest back → wait for their reports → flush
the result batcher → say goodbye on the session)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from shared.lifetime import Lifetime
from shared.registry import JobDefinition
from worker_service.domain.model import CancelCause
from worker_service.gateway import ModelGateway
from worker_service.grants_ahead import GrantsAhead
from worker_service.intake import QueueIntake
from worker_service.pipeline import Pipeline
from worker_service.ports import DispatchSource, ExecutorApi, SessionApi
from worker_service.results import ResultBatcher
from worker_service.session import WorkerSession

log = logging.getLogger(__name__)

# After the hand-back, reports (bounded by the lease) get this long before a hard stop.
FINALIZE_TIMEOUT_S = 15.0


class Worker(Lifetime):
    """Consumes the given queues and runs their jobs, ``slots[queue]`` at a time.

    ``run()`` returns once stopped and drained (or raises the failure of a side loop, after
    draining); ``stop()`` is idempotent and waits for that; ``async with`` runs it in the
    background for the block's duration."""

    def __init__(
        self,
        *,
        executor: ExecutorApi,
        source: DispatchSource,
        lookup: Callable[[str], JobDefinition],
        slots: Mapping[str, int],
        worker_id: str,
        fetch_batch: int = 32,
        fetch_timeout_s: float = 1.0,
        shutdown_grace_s: float = 20.0,
        gateway: ModelGateway | None = None,
        runnable: Sequence[str] = (),
        sessions: SessionApi | None = None,
        grants_ahead: bool = False,
        lock_on_submit: bool = False,
    ) -> None:
        """``runnable``: the definitions this worker runs, as "job_type@version" (it is
        granted only jobs pinned to one of them; empty: any). ``sessions``: where to hold
        the worker's session (None: none, and a crash waits for the leases to expire).
        ``grants_ahead``: report free slots on the session (ADR 0009; needs ``sessions``),
        and with ``lock_on_submit`` ask for the next jobs with each batch of results while
        the queue is backed up."""
        if not slots:
            raise ValueError("a worker needs at least one queue")
        self.worker_id = worker_id
        self._grace_s = shutdown_grace_s
        self._fetch_timeout_s = fetch_timeout_s
        self._results = ResultBatcher(executor)
        self._pipeline = Pipeline(
            executor, self._results, lookup, worker_id=worker_id, gateway=gateway
        )
        self._intakes = [
            QueueIntake(
                queue,
                count,
                source=source,
                executor=executor,
                pipeline=self._pipeline,
                worker_id=worker_id,
                fetch_batch=fetch_batch,
                fetch_timeout_s=fetch_timeout_s,
                runnable=runnable,
            )
            for queue, count in slots.items()
        ]
        self.session = None
        grants = None
        if grants_ahead:
            grants = GrantsAhead(self._intakes, lookup, worker_id=worker_id, definitions=runnable)
            if lock_on_submit:
                self._results.grants = grants
        if sessions is not None:
            self.session = WorkerSession(
                sessions, worker_id, grants, reopened=self._pipeline.doubt_leases
            )
            for intake in self._intakes:
                intake.start_after(self.session.registered)
        self._stop_requested = asyncio.Event()
        self._finished = asyncio.Event()
        self._started = False

    @property
    def running_jobs(self) -> int:
        """Attempts executing right now."""
        return self._pipeline.running

    @property
    def stopping(self) -> bool:
        return self._stop_requested.is_set()

    def cancel_job(self, job_id: str) -> bool:
        """Stop the job at once if it runs here (it reports CANCELLED); True if it did."""
        return self._pipeline.cancel(job_id, CancelCause.CANCEL_REQUESTED)

    def signal_job(self, job_id: str, seq: int) -> bool:
        """The job has signals up to ``seq``; True if it runs here."""
        return self._pipeline.signal(job_id, seq)

    async def run(self) -> None:
        if self._started:
            raise RuntimeError("a Worker runs once")
        self._started = True
        # Started first and stopped last: every result has its batcher.
        results = asyncio.create_task(self._results.run(), name="result-batcher")
        loops = {
            asyncio.create_task(intake.run(), name=f"intake-{intake.queue}"): intake
            for intake in self._intakes
        }
        # the session lives as long as the batcher: goodbye only once every report is in
        session = (
            asyncio.create_task(self.session.run(), name="worker-session")
            if self.session is not None
            else None
        )
        side = {results} | ({session} if session is not None else set())
        stop_requested = asyncio.create_task(self._stop_requested.wait(), name="worker-stop")
        log.info(
            "worker %s running: %s",
            self.worker_id,
            ", ".join(f"{i.queue} ({i.slots} slots)" for i in self._intakes),
        )
        failure: BaseException | None = None
        try:
            done, _ = await asyncio.wait(
                {*loops, *side, stop_requested}, return_when=asyncio.FIRST_COMPLETED
            )
            failure = _failure({task for task in (*loops, *side) if task in done})
            if failure is not None:
                log.error("worker %s: stopping: %r", self.worker_id, failure, exc_info=failure)
            await self._drain(loops, results)
            if self.session is not None and session is not None:
                await self.session.close()
                await self._cancel_all({session})
        except asyncio.CancelledError:
            await self._abort({*loops, *side})
            raise
        finally:
            stop_requested.cancel()
            self._finished.set()
        log.info("worker %s stopped", self.worker_id)
        if failure is not None:
            raise failure

    async def stop(self) -> None:
        """Stop gracefully and wait until done. Idempotent; safe before ``run()``."""
        self._stop_requested.set()
        if self._started:
            await self._finished.wait()

    async def start(self) -> None:
        self.run_in_background(self.run(), f"worker-{self.worker_id}")

    def _in_flight(self) -> set[asyncio.Task[None]]:
        return set().union(*(intake.tasks for intake in self._intakes))

    async def _drain(
        self, loops: Mapping[asyncio.Task[None], QueueIntake], results: asyncio.Task[None]
    ) -> None:
        self._stop_requested.set()
        for intake in self._intakes:
            intake.stop()
        # Stopped intakes start nothing new: this set is final. Loops end after their fetch
        # in progress (its messages are handed back) while in-flight jobs use the grace.
        if pending := self._in_flight():
            log.info(
                "worker %s: waiting up to %.1fs for %d in-flight jobs",
                self.worker_id,
                self._grace_s,
                len(pending),
            )
            await asyncio.wait(pending, timeout=self._grace_s)
        handed_back = self._pipeline.shutdown()
        if handed_back:
            log.info("worker %s: handing back %d jobs", self.worker_id, handed_back)
        if pending := self._in_flight():
            _, stuck = await asyncio.wait(pending, timeout=FINALIZE_TIMEOUT_S)
            if stuck:
                log.error(
                    "worker %s: %d jobs did not stop; abandoning them", self.worker_id, len(stuck)
                )
                await self._cancel_all(stuck)
        # Every job has ended, so every result has been handed over: send what is queued.
        # Bounded: calls in flight end within their timeouts, and nothing new is queued.
        await self._results.stop()
        await asyncio.wait({results})
        if pending := self._in_flight():
            # granted with the last results, after the intakes stopped: each is handed back
            await asyncio.wait(pending, timeout=FINALIZE_TIMEOUT_S)
        done, stuck = await asyncio.wait(loops, timeout=self._fetch_timeout_s + 1.0)
        for task in {*done, results}:
            if not task.cancelled() and (exc := task.exception()) is not None:
                log.error("worker %s: %s failed", self.worker_id, task.get_name(), exc_info=exc)
        await self._cancel_all(stuck)

    async def _abort(self, side_loops: set[asyncio.Task[None]]) -> None:
        """Cancelled from outside: stop everything now; leases expire on the job service."""
        for intake in self._intakes:
            intake.stop()
        await self._cancel_all({*side_loops, *self._in_flight()})

    @staticmethod
    async def _cancel_all(tasks: set[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


def _failure(loops: set[asyncio.Task[None]]) -> BaseException | None:
    """The error of the first ended side loop; ending without one is a failure too, since
    side loops end only when stopped."""
    for task in loops:
        if task.cancelled():
            return RuntimeError(f"{task.get_name()} was cancelled")
        return task.exception() or RuntimeError(f"{task.get_name()} ended on its own")
    return None
