"""The workers waiting on this replica for pushed grants (ADR 0009), as their sessions
report them: free slots per queue, less the grants pushed since the worker counted.

A worker's session reports its free slots per queue (``report``). The slot count the job
service works with is the worker's report less the grants pushed since the worker counted
(``grants_taken``): a stale report never makes it push more than the worker has room for.
A worker reports at least every 0.25 s; one not heard from for ``REPORT_STALE_S`` (frozen,
or its process stopped) is pushed nothing until it reports again, so that the jobs it would
never run go to NATS, where a live worker fetches them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from job_service.domain.grants import LockGrant

# A worker reports every 0.25 s (worker_service/adapters/grpc_session.py, REPORT_EVERY_S):
# one silent for three of those is not waiting for work (a false alarm only sends the
# job through NATS).
REPORT_STALE_S = 0.75

# Sends grants down a session; False when the session has ended (nothing was sent).
Deliver = Callable[[list[LockGrant]], bool]


@dataclass
class WaitingWorker:
    """A session that reports its slots, as this replica knows it."""

    session_id: int
    worker_id: str
    definitions: list[str] | None
    deliver: Deliver
    free: dict[str, int] = field(default_factory=dict)
    # The queue of every grant pushed that the worker had not taken at its last report,
    # oldest first; ``taken`` counts the ones pushed before them.
    unconfirmed: deque[str] = field(default_factory=deque)
    taken: int = 0
    # when its last report came (monotonic)
    heard_at: float = field(default_factory=time.monotonic)

    def room(self, queue: str) -> int:
        if time.monotonic() - self.heard_at > REPORT_STALE_S:
            return 0
        return self.free.get(queue, 0) - self.unconfirmed.count(queue)

    def report(self, free: Mapping[str, int], taken: int) -> None:
        self.heard_at = time.monotonic()
        while self.taken < taken and self.unconfirmed:
            self.unconfirmed.popleft()
            self.taken += 1
        self.free = {queue: n for queue, n in free.items() if n > 0}

    def pushed(self, queue: str, count: int) -> None:
        self.unconfirmed.extend([queue] * count)


class WaitingWorkers:
    """This replica's sessions that may be pushed grants, by session id."""

    def __init__(self) -> None:
        self._waiting: dict[int, WaitingWorker] = {}

    def open(
        self, session_id: int, worker_id: str, definitions: Sequence[str], deliver: Deliver
    ) -> None:
        """A session that may report slots: it is pushed grants once it reports some."""
        self._waiting[session_id] = WaitingWorker(
            session_id, worker_id, list(definitions) or None, deliver
        )

    def report(self, session_id: int, free: Mapping[str, int], taken: int) -> None:
        if (worker := self._waiting.get(session_id)) is not None:
            worker.report(free, taken)

    def close(self, session_id: int) -> None:
        self._waiting.pop(session_id, None)

    def most_room(self, queue: str) -> WaitingWorker | None:
        """The worker with the most room in ``queue``, if any has some."""
        best = max(self._waiting.values(), key=lambda w: w.room(queue), default=None)
        return best if best is not None and best.room(queue) > 0 else None
