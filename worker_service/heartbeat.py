"""The heartbeat: keeps a running attempt's lease alive and stops the attempt when the job
service says so (cancel requested, lease lost)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from shared.lifetime import Lifetime
from worker_service import metrics
from worker_service.attempt import Attempt
from worker_service.domain.errors import is_transient, means_lease_lost
from worker_service.domain.model import CancelCause, Lease
from worker_service.ports import ExecutorApi

log = logging.getLogger(__name__)

# A heartbeat call may take this long at least, however close the lease deadline is.
MIN_CALL_TIMEOUT_S = 0.2


class Heartbeat(Lifetime):
    """An async context manager around one attempt's execution.

    The first beat goes out one interval after entry, so that jobs shorter than an interval
    cost no heartbeat at all (only a timer). Each beat extends the lease and reports
    progress; ``cancel_requested`` or ``LEASE_LOST`` in answer cancel the attempt. Transient
    failures are retried at the next beat, until the lease has run out by the local clock:
    the job service will have handed the job to someone else by then, so the attempt stops.
    """

    def __init__(
        self,
        executor: ExecutorApi,
        attempt: Attempt,
        lease: Lease,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._executor = executor
        self._attempt = attempt
        self._lease = lease
        self._clock = clock
        self._interval = attempt.job.heartbeat_interval_s
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def start(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._interval, self._first_beat)
        self._attempt.beat_now = self._beat_now

    def _beat_now(self) -> None:
        """Beat at once (the session came back: is the lease still ours?)."""
        if self._task is None:
            if self._timer is not None:
                self._timer.cancel()
            self._first_beat()
        else:
            self._wake.set()

    async def stop(self) -> None:
        self._attempt.beat_now = None
        if self._timer is not None:
            self._timer.cancel()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            # asyncio.wait, not `await task`: a cancellation of *our* caller must propagate.
            await asyncio.wait({task})

    def _first_beat(self) -> None:
        self._task = asyncio.create_task(self._beat(), name=f"heartbeat-{self._attempt.job_id}")

    async def _beat(self) -> None:
        attempt, lease = self._attempt, self._lease
        while True:
            started = self._clock()
            if lease.expired(started):
                log.warning(
                    "job %s attempt %d: lease ran out without a heartbeat getting through; "
                    "stopping",
                    attempt.job_id,
                    attempt.attempt,
                )
                attempt.cancel(CancelCause.LEASE_LOST)
                return
            progress = attempt.take_progress()
            timeout = max(MIN_CALL_TIMEOUT_S, min(self._interval, lease.deadline - started))
            try:
                reply = await self._executor.heartbeat(
                    attempt.job_id, lease.token, progress, timeout_s=timeout
                )
            except Exception as exc:
                attempt.restore_progress(progress)
                if means_lease_lost(exc):
                    log.info(
                        "job %s attempt %d: lease lost; stopping without reporting",
                        attempt.job_id,
                        attempt.attempt,
                    )
                    if attempt.lease_in_doubt:  # ended while this worker was cut off
                        metrics.rerun_after_reconnect(attempt.job.job_type)
                    attempt.cancel(CancelCause.LEASE_LOST)
                    return
                level = logging.DEBUG if is_transient(exc) else logging.WARNING
                log.log(
                    level,
                    "job %s attempt %d: heartbeat failed (%s); will retry",
                    attempt.job_id,
                    attempt.attempt,
                    type(exc).__name__,
                )
            else:
                lease.extend(started)
                attempt.lease_confirmed()
                attempt.announce_signals(reply.latest_signal_seq)
                if reply.cancel_requested:
                    log.info(
                        "job %s attempt %d: cancel requested; stopping",
                        attempt.job_id,
                        attempt.attempt,
                    )
                    attempt.cancel(CancelCause.CANCEL_REQUESTED)
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._wake.wait(), max(0.0, self._interval - (self._clock() - started))
                )
            self._wake.clear()
