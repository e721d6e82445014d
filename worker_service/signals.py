"""An attempt's signals: what ``ctx.signal(name)`` and ``ctx.poll_signal(name)`` read.

The job service stores every signal before delivering it, numbered per job in send order
(``seq``). An attempt pulls them (``FetchSignals`` under its lease) the first time its job
code asks, and again whenever it learns of a newer seq: from the notice on core NATS (at
once) or from a heartbeat answer (the backstop for a lost notice). ``SignalInbox`` is the
pure part — send order, each signal handed to job code at most once per attempt, repeats
of a fetch dropped — and ``AttemptSignals`` the waiting and fetching around it. A new
attempt starts with an empty inbox, so a retried attempt sees every signal again.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from worker_service.domain.errors import ExecutorUnreachable, means_lease_lost
from worker_service.domain.model import Signal

log = logging.getLogger(__name__)

# After a fetch failed for a transient reason, a waiting ctx.signal() tries again this soon.
RETRY_FETCH_S = 0.5


# FetchSignals for one attempt: the signals after a seq, and whether there are more.
Fetch = Callable[[int], Awaitable[tuple[Sequence[Signal], bool]]]


class SignalInbox:
    """The signals an attempt has fetched, in seq order, and which job code has taken.

    ``announce(seq)`` records that the job has signals up to ``seq``; ``behind`` says a
    fetch would find more (always before the first fetch). ``add`` ignores signals it holds
    already, so a repeated or overlapping fetch changes nothing."""

    def __init__(self) -> None:
        self._signals: list[Signal] = []
        self._seqs: set[int] = set()
        self._taken: set[int] = set()
        self._fetched = False
        self.fetched_seq = 0
        self.latest_seq = 0

    @property
    def behind(self) -> bool:
        return not self._fetched or self.latest_seq > self.fetched_seq

    def announce(self, seq: int) -> bool:
        """True when ``seq`` is news (a fetch would find more)."""
        if seq <= self.latest_seq:
            return False
        self.latest_seq = seq
        return seq > self.fetched_seq

    def add(self, signals: Iterable[Signal], *, complete: bool) -> int:
        """Keeps the signals not held yet; ``complete``: the fetch found every signal there
        was (not cut at its limit). Returns how many were new."""
        new = 0
        for signal in signals:
            if signal.seq in self._seqs:
                continue
            bisect.insort(self._signals, signal)
            self._seqs.add(signal.seq)
            self.fetched_seq = max(self.fetched_seq, signal.seq)
            new += 1
        self.latest_seq = max(self.latest_seq, self.fetched_seq)
        if complete:
            self._fetched = True
        return new

    def mark_taken(self, seq: int) -> None:
        """A signal an earlier attempt took (a recorded signal wait): never handed over again."""
        self._taken.add(seq)

    def take(self, name: str) -> Signal | None:
        """The earliest signal named ``name`` that job code has not taken yet (now taken)."""
        for signal in self._signals:
            if signal.name == name and signal.seq not in self._taken:
                self._taken.add(signal.seq)
                return signal
        return None


class AttemptSignals:
    """Waits for and fetches one attempt's signals. ``delivered(signal, arrived_late)`` is
    called once per signal handed to job code (``arrived_late``: sent after the attempt
    started, so its latency means something)."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        delivered: Callable[[Signal, bool], None] = lambda _s, _late: None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._fetch = fetch
        self._delivered = delivered
        self._inbox = SignalInbox()
        self._changed = asyncio.Event()
        self._lock = asyncio.Lock()
        self._started_at = wall_clock()

    def announce(self, seq: int) -> None:
        """The job has signals up to ``seq`` (a notice or a heartbeat said so)."""
        if self._inbox.announce(seq):
            self._changed.set()

    async def wait(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        """The payload of the next signal named ``name``, waiting for it up to ``timeout``
        seconds (None: as long as the attempt runs). TimeoutError when none came."""
        async with asyncio.timeout(timeout):
            while True:
                self._changed.clear()
                fetched = await self._catch_up()
                signal = self._inbox.take(name)
                if signal is not None:
                    return self._hand_over(signal)
                if fetched:
                    await self._changed.wait()
                else:  # the job service was unreachable: a notice may not come again
                    try:
                        async with asyncio.timeout(RETRY_FETCH_S):
                            await self._changed.wait()
                    except TimeoutError:
                        pass

    async def poll(self, name: str) -> dict[str, Any] | None:
        """The payload of the next signal named ``name`` if one has arrived, else None;
        never waits for one (it fetches when there is news)."""
        await self._catch_up()
        signal = self._inbox.take(name)
        return None if signal is None else self._hand_over(signal)

    async def poll_signal(self, name: str) -> Signal | None:
        """``poll``, answering the signal with its seq; ExecutorUnreachable when the job
        service could not be asked (a durable wait must not take silence for "none")."""
        if not await self._catch_up():
            raise ExecutorUnreachable("the job service could not be asked for signals")
        signal = self._inbox.take(name)
        if signal is not None:
            self._hand_over(signal)
        return signal

    def mark_taken(self, seq: int) -> None:
        self._inbox.mark_taken(seq)

    @property
    def seen_seq(self) -> int:
        """The newest signal seq fetched."""
        return self._inbox.fetched_seq

    def _hand_over(self, signal: Signal) -> dict[str, Any]:
        self._delivered(signal, signal.sent_at.timestamp() >= self._started_at)
        return dict(signal.payload)

    async def _catch_up(self) -> bool:
        """Fetches until the inbox holds every signal it has heard of. False when a fetch
        failed for a transient reason (retried later); a lost lease raises."""
        async with self._lock:
            while self._inbox.behind:
                heard = self._inbox.latest_seq
                try:
                    signals, more = await self._fetch(self._inbox.fetched_seq)
                except Exception as exc:
                    if means_lease_lost(exc):
                        raise
                    log.warning("fetching signals failed (%s); will retry", type(exc).__name__)
                    return False
                new = self._inbox.add(signals, complete=not more)
                if not new and not more and self._inbox.latest_seq == heard:
                    # a seq announced before this fetch began that it did not find: not
                    # ours to see (yet); the next announcement or heartbeat tries again
                    self._inbox.latest_seq = self._inbox.fetched_seq
                    break
        return True
