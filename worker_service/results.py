"""The result batcher: successful attempts' results, many to one SubmitResults call.

Natural batching, as in a database's group commit: a result goes out at once while a call
slot is free, and the results that finish while every slot is busy ride together in the next
call. Nothing waits on a timer, so a lone result costs no added latency, while under load one
call carries many results (a gRPC call costs the job service more CPU than its commit).

With grants ahead (ADR 0009) each call also asks for the next jobs of the slots its results
free (lock on submit), and the jobs granted with the answer start at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from shared.lifetime import Lifetime
from worker_service import stage_times
from worker_service.domain.errors import ExecutorCallFailed
from worker_service.domain.model import ResultSubmission
from worker_service.grants_ahead import GrantsAhead
from worker_service.ports import MAX_BATCH, ExecutorApi

log = logging.getLogger(__name__)

# Two calls in flight: one being answered while the next one fills up.
MAX_CALLS_IN_FLIGHT = 2


@dataclass(slots=True)
class _Item:
    submission: ResultSubmission
    timeout_s: float
    answer: asyncio.Future[str]


class ResultBatcher(Lifetime):
    """A ``ResultSink`` over ``ExecutorApi.submit_results``.

    Each waiter gets its own item's answer: a refused item (``LeaseLost``, ...) raises to its
    waiter only, while a failed call raises its error to every waiter of that call, each of
    which decides on its own whether to submit again (the retry simply joins a later call).

    ``run()`` sends until stopped, then flushes what is queued and waits for the calls in
    flight; results submitted meanwhile are still sent. ``stop()`` is idempotent and waits
    for that; ``async with`` runs the batcher for the block's duration."""

    def __init__(
        self,
        executor: ExecutorApi,
        *,
        max_batch: int = MAX_BATCH,
        max_calls: int = MAX_CALLS_IN_FLIGHT,
        grants: GrantsAhead | None = None,
    ) -> None:
        """``grants``: ask for the next jobs with each call (lock on submit); None: never."""
        if not 1 <= max_batch <= MAX_BATCH or max_calls < 1:
            raise ValueError(f"max_batch must be 1..{MAX_BATCH} and max_calls at least 1")
        self.grants = grants
        self._executor = executor
        self._max_batch = max_batch
        self._max_calls = max_calls
        self._queue: deque[_Item] = deque()
        # Each call in flight, with the results it carries.
        self._calls: dict[asyncio.Task[None], list[_Item]] = {}
        # Set on every change that may let a call start: a submit, a call's end, a stop.
        self._wake = asyncio.Event()
        self._stopping = False
        self._started = False
        self._closed = False
        self._finished = asyncio.Event()

    @property
    def queued(self) -> int:
        """Results waiting for a call."""
        return len(self._queue)

    async def submit(self, submission: ResultSubmission, *, timeout_s: float) -> str:
        """The job's resulting status name. ``timeout_s`` bounds the call that carries it."""
        if self._closed:
            # Shutdown stops the batcher only after every job has ended: this is a bug.
            raise ExecutorCallFailed("the result batcher has stopped")
        item = _Item(submission, timeout_s, asyncio.get_running_loop().create_future())
        self._queue.append(item)
        self._wake.set()
        return await item.answer

    async def run(self) -> None:
        if self._started:
            raise RuntimeError("a ResultBatcher runs once")
        self._started = True
        try:
            while await self._call_due():
                batch = self._take()
                task = asyncio.create_task(self._send(batch), name="submit-results")
                self._calls[task] = batch
                task.add_done_callback(self._call_ended)
            if self._calls:
                await asyncio.wait(set(self._calls))
        except asyncio.CancelledError:
            calls = dict(self._calls)
            for task in calls:
                task.cancel()
            if calls:
                await asyncio.wait(calls)
            # Answered here, not in _send: a call cancelled before its first step never ran.
            for batch in calls.values():
                _answer_all(batch, ExecutorCallFailed("the result batcher has stopped"))
            raise
        finally:
            self._closed = True
            _answer_all(self._queue, ExecutorCallFailed("the result batcher has stopped"))
            self._queue.clear()
            self._finished.set()

    async def stop(self) -> None:
        """Send what is queued, wait for the calls in flight, end ``run()``. Idempotent."""
        self._stopping = True
        self._wake.set()
        if self._started:
            await self._finished.wait()

    async def start(self) -> None:
        self.run_in_background(self.run(), "result-batcher")

    async def _call_due(self) -> bool:
        """Wait until results are queued and a call may start; False once stopping with
        nothing queued."""
        while True:
            if self._queue and len(self._calls) < self._max_calls:
                return True
            if self._stopping and not self._queue:
                return False
            self._wake.clear()
            await self._wake.wait()

    def _take(self) -> list[_Item]:
        """The next call's results, in order. A job appears once per call at most (the job
        service refuses a repeat): a result still being retried for a stale attempt and
        the result of the job's next attempt go in separate calls."""
        batch: list[_Item] = []
        later: list[_Item] = []
        jobs: set[str] = set()
        while self._queue and len(batch) < self._max_batch:
            item = self._queue.popleft()
            if item.submission.job_id in jobs:
                later.append(item)
            else:
                jobs.add(item.submission.job_id)
                batch.append(item)
        self._queue.extendleft(reversed(later))
        return batch

    async def _send(self, batch: list[_Item]) -> None:
        answers: list[str | Exception]
        submissions = [item.submission for item in batch]
        # The strictest deadline of the batch: no waiter waits longer than it asked.
        timeout_s = min(item.timeout_s for item in batch)
        grants = self.grants
        wanted = grants.wanted(submissions) if grants is not None else {}
        stage_times.mark((s.job_id for s in submissions), "submitted")
        try:
            if grants is not None and wanted:
                answered, granted = await self._executor.submit_results_and_lock(
                    submissions,
                    timeout_s=timeout_s,
                    wanted=wanted,
                    worker_id=grants.worker_id,
                    runnable=grants.definitions,
                )
                # started before the results' waiters hear back: their slots pass on
                grants.granted(granted, wanted)
            else:
                answered = await self._executor.submit_results(submissions, timeout_s=timeout_s)
            if len(answered) != len(batch):
                raise ExecutorCallFailed(
                    f"SubmitResults answered {len(answered)} of {len(batch)} results"
                )
            answers = list(answered)
        except Exception as exc:
            log.debug("SubmitResults for %d results failed (%s)", len(batch), type(exc).__name__)
            answers = [exc] * len(batch)
        for item, answer in zip(batch, answers, strict=True):
            _answer(item.answer, answer)

    def _call_ended(self, task: asyncio.Task[None]) -> None:
        self._calls.pop(task, None)
        self._wake.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a SubmitResults call failed unexpectedly", exc_info=exc)


def _answer(waiter: asyncio.Future[str], answer: str | Exception) -> None:
    if waiter.done():  # its job was cancelled while the result was on its way
        return
    if isinstance(answer, Exception):
        waiter.set_exception(answer)
    else:
        waiter.set_result(answer)


def _answer_all(items: Iterable[_Item], error: Exception) -> None:
    for item in items:
        _answer(item.answer, error)
