"""Worker sessions: a worker's live stream with this replica, and the process behind it.

A worker process names itself (its incarnation, drawn when it starts) in every session it
opens. A session of a new incarnation under a worker id whose last session was another
incarnation's means that process is gone (the worker was restarted: a container in the
same pod): its leases end at once, in the transaction that registers the new session. A
session of the same incarnation is the process back after an interruption: nothing ends,
however long the gap; its leases end only if they expire (the lease reaper) or a new
process replaces it. So an interruption shorter than the lease costs nothing, and a
process that vanished with no successor costs its lease TTL — unless the deployment
opted in to a reconnect grace (``reconnect_grace_s``): then a session its process does
not reopen within that grace is taken for a crash, as an older worker's is.

An older worker names no process: a session of it that ends without a goodbye ends the
worker's leases after a short grace, unless the worker opened a new session meanwhile (on
any replica). Only the replica that saw that disconnect acts, and only when no newer
session of the worker exists; a replica that dies before acting leaves the leases to the
reaper. Sessions this replica ends itself (it is stopping) are never disconnects.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from job_service import metrics
from job_service.domain.attempts import FailureOutcome
from job_service.domain.checks import require_name
from job_service.ports.leases import AttemptEnding
from job_service.ports.sessions import SessionStore
from job_service.usecases.leases import Leases
from shared.errors import ErrorCode

log = logging.getLogger(__name__)

# A worker holds at most its slots' worth of leases; more rounds if it held more.
END_BATCH = 256
# A session that brings no ping for this many of its intervals has lost its worker (frozen,
# or cut off behind a connection that stays up: the kernel still answers for a stopped
# process) and ends as a disconnect.
MISSED_PINGS = 3


@dataclass(frozen=True)
class Session:
    id: int
    worker_id: str
    # the worker process; empty for an older worker, which names none
    incarnation: str = ""


def replaces_another_process(incarnation: str, previous: str | None) -> bool:
    """Whether a session of process ``incarnation`` follows one of another process of the
    same worker id (``previous``). A session that names no process (an older worker's, or
    one an older replica registered) proves nothing, on either side: a process may then
    have been restarted or merely reconnected."""
    return bool(incarnation) and previous is not None and previous != incarnation


class WorkerSessions:
    """This replica's sessions. ``close()`` ends them all (the replica is stopping) and
    waits for the disconnects being decided, within the grace."""

    def __init__(
        self,
        store: SessionStore,
        leases: Leases,
        *,
        instance_id: str,
        grace_s: float,
        ping_interval_s: float,
        reconnect_grace_s: float | None = None,
    ) -> None:
        self._store = store
        self._leases = leases
        self._instance_id = instance_id
        self.grace_s = grace_s
        self.reconnect_grace_s = reconnect_grace_s
        self.ping_interval_s = ping_interval_s
        self.silence_s = ping_interval_s * MISSED_PINGS
        self._open: set[Session] = set()
        self._deciding: set[asyncio.Task[None]] = set()
        # set when this replica stops: streams end, and their end is no disconnect
        self.closing = asyncio.Event()

    @property
    def open_count(self) -> int:
        return len(self._open)

    async def open(self, worker_id: str, incarnation: str = "") -> Session:
        """Registers a session of process ``incarnation`` of ``worker_id``; if the worker's
        last session was another process's, that process is gone: its leases end now."""
        require_name("worker_id", worker_id)
        if incarnation:
            require_name("incarnation", incarnation)
        async with self._store.open(worker_id, self._instance_id, incarnation) as registered:
            restarted = replaces_another_process(incarnation, registered.previous_incarnation)
            ended = (
                await self._end_all(registered.ending, worker_id, "worker restarted")
                if restarted
                else []
            )
        session = Session(registered.session_id, worker_id, incarnation)
        self._open.add(session)
        metrics.worker_sessions_open(len(self._open))
        if restarted:
            log.warning(
                "worker %s: a new process opened session %d; %d leases of the previous one ended",
                worker_id,
                session.id,
                len(ended),
            )
            self._leases.wake_for(ended)
        else:
            log.info("worker %s: session %d opened", worker_id, session.id)
        return session

    async def goodbye(self, session: Session) -> None:
        """The worker shut down cleanly: its leases are its own business (handed back)."""
        self._forget(session)
        await self._store.close(session.id, goodbye=True)
        log.info("worker %s: session %d closed with a goodbye", session.worker_id, session.id)

    def ended(self, session: Session) -> None:
        """The session's stream ended without a goodbye. Called from the stream's own
        teardown (possibly cancelled), so the rest runs in a task of its own."""
        if session not in self._open:
            return
        self._forget(session)
        grace = None if self.closing.is_set() else self.grace_for(session)
        task = asyncio.create_task(
            self._after_disconnect(session, grace),
            name=f"session-{session.id}-ended",
        )
        self._deciding.add(task)
        task.add_done_callback(self._deciding.discard)

    def grace_for(self, session: Session) -> float | None:
        """How long a session that ended without a goodbye has to come back before its
        worker's leases end; None: they are left to the lease. A process that named itself
        is judged by its successor or its leases, never by an interruption, unless the
        deployment set a reconnect grace."""
        return self.reconnect_grace_s if session.incarnation else self.grace_s

    async def close(self) -> None:
        """Ends every stream of this replica (their workers reconnect elsewhere) and lets
        the disconnects already seen be decided, within the grace and a margin."""
        self.closing.set()
        if self._deciding:
            longest = max(self.grace_s, self.reconnect_grace_s or 0.0)
            await asyncio.wait(set(self._deciding), timeout=longest + 5.0)
        for task in set(self._deciding):
            task.cancel()

    def _forget(self, session: Session) -> None:
        self._open.discard(session)
        metrics.worker_sessions_open(len(self._open))

    async def _after_disconnect(self, session: Session, grace: float | None) -> None:
        try:
            await self._store.close(session.id, goodbye=False)
            if grace is None:
                return
            log.info(
                "worker %s: session %d ended without a goodbye; waiting %.2fs for it",
                session.worker_id,
                session.id,
                grace,
            )
            await asyncio.sleep(grace)  # the grace itself: a new session may come
            outcomes = await self._end_leases_unless_back(session)
        except Exception:
            # the lease reaper ends these leases when they expire
            log.exception("worker %s: deciding its disconnect failed", session.worker_id)
            return
        if outcomes is None:
            log.info("worker %s: came back within the grace", session.worker_id)
            return
        log.warning("worker %s: disconnected; %d leases ended", session.worker_id, len(outcomes))
        self._leases.wake_for(outcomes)

    async def _end_leases_unless_back(self, session: Session) -> list[FailureOutcome] | None:
        """Ends every lease of the session's worker in one transaction; None when the
        worker opened a session since (it is alive)."""
        async with self._store.ending_leases(session.worker_id, session.id) as tx:
            if tx is None:
                return None
            return await self._end_all(tx, session.worker_id, "worker disconnected")

    async def _end_all(
        self, tx: AttemptEnding, worker_id: str, message: str
    ) -> list[FailureOutcome]:
        """Ends, in ``tx``, every lease ``worker_id`` holds as WORKER_DISCONNECTED, exactly
        as the reaper ends an expired one."""
        ended: list[FailureOutcome] = []
        while True:
            batch = await tx.of_worker(worker_id, END_BATCH)
            ended += await self._leases.end_abandoned(
                tx, batch, ErrorCode.WORKER_DISCONNECTED, message
            )
            if len(batch) < END_BATCH:
                return ended
