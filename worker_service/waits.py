"""Durable sleeps and signal waits of one attempt (issue 45, ADR 0013): a job that waits
costs a row, not a worker slot.

    ctx.sleep(s) / ctx.sleep_until(t)   step ``sleep`` records the wake time on the first
                                        run; while it is ahead, the attempt ends
                                        SUSPENDED_SLEEP (handed back, not a failure) and the
                                        job runs again from the top at that time, its
                                        recorded steps returned as recorded
    ctx.wait_for_signal(name, timeout)  step ``signal_wait`` records the timeout's time;
                                        step ``signal`` records what ended the wait (the
                                        signal, or the timeout) once something did: until
                                        then the attempt ends SUSPENDED_SIGNAL, and a signal
                                        sent to the job (or the timeout) wakes it

Because the outcome of a wait is a recorded step, a replay returns what the first run got,
whatever arrived since; a signal a recorded wait took is not handed to later waits of the
replay (each signal once, in send order). The wake time is the worker's clock, sent as a
delay: the job service's clock decides when the job is due.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from shared.durable_steps import MAX_SUSPENSION_S
from shared.errors import ErrorCode, ExecutionError
from worker_service.domain.model import SignalWait
from worker_service.durable_steps import DurableSteps
from worker_service.signals import AttemptSignals


class Waits:
    def __init__(
        self,
        steps: DurableSteps,
        inbox: Callable[[], AttemptSignals],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._steps = steps
        self._inbox = inbox
        self._clock = clock

    async def sleep_until(self, when: float) -> None:
        """Returns once the wall clock is past ``when`` (epoch seconds), which the first
        run records; until then the attempt is suspended."""
        until = await self._steps.run("sleep", _bounded_by(self._clock, when), ())
        ahead = until - self._clock()
        if ahead > 0:
            raise ExecutionError(
                ErrorCode.SUSPENDED_SLEEP, f"asleep until {_iso(until)}", retry_after_s=ahead
            )

    async def wait_for_signal(self, name: str, timeout: float) -> dict[str, Any] | None:
        """The payload of the next signal named ``name`` (each once, in send order), or None
        once ``timeout`` seconds from the first run's call have passed without one."""
        if not timeout > 0:
            raise ValueError(f"a signal wait needs a timeout > 0 seconds (got {timeout!r})")
        until = await self._steps.run(
            "signal_wait", _bounded_by(self._clock, self._clock() + timeout), ()
        )
        ended = await self._steps.run("signal", self._signal_or_timeout, (name, until))
        if ended.get("name") != name:
            raise ExecutionError(
                ErrorCode.NONDETERMINISTIC,
                f"a wait for signal {name!r} where a wait for {ended.get('name')!r} was recorded",
            )
        if "seq" in ended:  # a replay: the signal is this wait's, not a later one's
            self._inbox().mark_taken(int(ended["seq"]))
        payload: dict[str, Any] | None = ended.get("payload")
        return payload

    async def _signal_or_timeout(self, name: str, until: float) -> dict[str, Any]:
        inbox = self._inbox()
        signal = await inbox.poll_signal(name)
        if signal is not None:
            return {"name": name, "seq": signal.seq, "payload": dict(signal.payload)}
        ahead = until - self._clock()
        if ahead <= 0:
            return {"name": name, "timed_out": True}
        raise SignalWait(
            ErrorCode.SUSPENDED_SIGNAL,
            f"waiting for signal {name!r} until {_iso(until)}",
            retry_after_s=ahead,
            signals_seen=inbox.seen_seq,
        )


def _bounded_by(clock: Callable[[], float], when: float) -> Callable[[], float]:
    """The wake time a first run records: ``when``, at most MAX_SUSPENSION_S from now."""
    return lambda: min(float(when), clock() + MAX_SUSPENSION_S)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
