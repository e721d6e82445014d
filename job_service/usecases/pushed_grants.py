"""Pushed grants (ADR 0009): a job that becomes due while a worker waits on this replica is
granted to that worker down its session, instead of going to NATS as a dispatch message the
worker would fetch and then lock with a LockJobs call.

A worker's session reports its free slots per queue (``report``). The outbox dispatcher
offers each batch of dispatch messages to ``push`` before publishing it: per queue, up to
one grant per message, claimed by the queue's ordinary claim (the same policy, limits and
fencing as LockJobs) for the waiting worker with the most free slots, and sent down its
session. The messages a grant used are marked published without being sent; the rest go to
NATS as before.

Nothing is lost on a crash: the grant commits before its messages are marked, so a replica
that dies in between leaves the messages claimed, and the stale-claim takeover publishes
them (a token too many: its LockJobs finds nothing or another job). A grant whose session
ended before it could be sent is handed back at once (WORKER_SHUTDOWN: the attempt is
refunded); one lost on the way to a worker is an ordinary lease, reaped when it expires.

The slot count the job service works with is the worker's report less the grants pushed
since the worker counted (``grants_taken``): a stale report never makes it push more than
the worker has room for. A worker reports at least every 0.25 s; one not heard from for
``REPORT_STALE_S`` (frozen, or its process stopped) is pushed nothing until it reports
again, so that the jobs it would never run go to NATS, where a live worker fetches them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from job_service import fault_hooks, metrics
from job_service.domain.grants import LockGrant
from job_service.domain.outbox import OutboxMessage
from job_service.usecases.claims import Claims
from job_service.usecases.leases import Leases
from shared import tracing
from shared.constants import DISPATCH_SUBJECT_PREFIX

log = logging.getLogger(__name__)

DISPATCH_PREFIX = DISPATCH_SUBJECT_PREFIX + "."
NOT_DELIVERED = "the pushed grant's session ended before it could be sent"
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


class GrantPusher:
    """This replica's waiting workers, and the grants pushed to them."""

    def __init__(self, claims: Claims, leases: Leases) -> None:
        self._claims = claims
        self._leases = leases
        self._waiting: dict[int, WaitingWorker] = {}
        self._handing_back: set[asyncio.Task[None]] = set()

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

    async def push(self, messages: Sequence[OutboxMessage]) -> set[int]:
        """Grants what it can for the dispatch messages among ``messages`` to waiting
        workers; returns the ids of the messages those grants used (mark them published,
        do not send them)."""
        if tracing.enabled():
            return set()  # a pushed grant carries no trace context yet: publish, as before
        tokens: dict[str, list[int]] = {}
        for message in messages:
            if message.subject.startswith(DISPATCH_PREFIX):
                queue = message.subject.removeprefix(DISPATCH_PREFIX)
                tokens.setdefault(queue, []).append(message.id)
        used: set[int] = set()
        for queue, ids in tokens.items():
            while ids and (worker := self._most_room(queue)) is not None:
                want = min(len(ids), worker.room(queue))
                grants = await self._claims.grant(queue, want, worker.worker_id, worker.definitions)
                if grants:
                    fault_hooks.grants_committed()
                    await self._send(worker, queue, grants)
                    used.update(ids[: len(grants)])
                    del ids[: len(grants)]
                if len(grants) < want:
                    break  # nothing more is eligible in this queue now
        return used

    def _most_room(self, queue: str) -> WaitingWorker | None:
        best = max(self._waiting.values(), key=lambda w: w.room(queue), default=None)
        return best if best is not None and best.room(queue) > 0 else None

    async def _send(self, worker: WaitingWorker, queue: str, grants: list[LockGrant]) -> None:
        if worker.deliver(grants):
            worker.pushed(queue, len(grants))
            metrics.grants_pushed(queue, len(grants))
            return
        self.close(worker.session_id)
        await self._hand_back(worker.worker_id, grants)

    def hand_back(self, worker_id: str, grants: list[LockGrant]) -> None:
        """Grants queued for a session that ended before they were sent: handed back in the
        background (called from the stream's teardown, which may be cancelled)."""
        task = asyncio.create_task(self._hand_back(worker_id, grants), name="grants-back")
        self._handing_back.add(task)
        task.add_done_callback(self._handing_back.discard)

    async def _hand_back(self, worker_id: str, grants: list[LockGrant]) -> None:
        log.info(
            "worker %s: session ended before %d pushed grants were sent; handing them back",
            worker_id,
            len(grants),
        )
        for grant in grants:
            try:
                await self._leases.submit_failure(
                    grant.job_id, grant.lease_token, "WORKER_SHUTDOWN", NOT_DELIVERED
                )
            except Exception:  # the lease expires and the reaper ends it
                log.exception("job %s: handing back an undelivered grant failed", grant.job_id)
