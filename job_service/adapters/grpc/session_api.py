"""ExecutorService.WorkerSession: the stream a worker holds for its lifetime (see
``job_service.usecases.sessions``). The first message names the worker and its process
(incarnation; none from an older worker); then pings, each
answered; a goodbye, answered ``closed``, ends it cleanly. Any other end — the worker's
connection closed, a malformed message, no ping for ``MISSED_PINGS`` intervals — is a
disconnect.

A worker that reports its free slots is pushed grants down the stream
(``job_service.usecases.grants``); a slot report is not answered. Grants queued for
a stream that ends before they were written are handed back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from job_service.domain.grants import LockGrant
from job_service.usecases.grants import Grants
from job_service.usecases.sessions import WorkerSessions
from job_service.usecases.waiting_workers import WaitingWorkers
from shared.errors import FieldViolation, InvalidInput
from shared.pb.jobs.v1 import executor_service_pb2 as pb

log = logging.getLogger(__name__)

_PONG = pb.WorkerSessionResponse()
_CLOSED = pb.WorkerSessionResponse(closed=True)


async def serve_session(
    sessions: WorkerSessions,
    grants: Grants,
    grant_to_pb: Callable[[LockGrant], pb.LockedJob],
    requests: AsyncIterator[pb.WorkerSessionRequest],
    context: grpc.aio.ServicerContext,
) -> AsyncIterator[pb.WorkerSessionResponse]:
    first = await anext(requests, None)
    if first is None:
        return  # closed before saying who it is: nothing was registered
    if first.goodbye:
        raise _misplaced("goodbye", "not in the first message, which names the worker")
    if sessions.closing.is_set():
        return  # this replica is stopping: the worker opens its session elsewhere
    session = await sessions.open(first.worker_id, first.incarnation)
    pushed: asyncio.Queue[list[LockGrant]] = asyncio.Queue()
    live = True

    def deliver(grants: list[LockGrant]) -> bool:
        if live:
            pushed.put_nowait(grants)
        return live

    waiting = grants.waiting
    if waiting is not None:
        waiting.open(session.id, session.worker_id, first.runnable_definitions, deliver)
    clean = False
    try:
        yield pb.WorkerSessionResponse(
            session_id=str(session.id),
            disconnect_grace_ms=round((sessions.grace_for(session) or 0.0) * 1000),
            ping_interval_ms=round(sessions.ping_interval_s * 1000),
        )
        _report_slots(waiting, session.id, first)
        async for request in _until_closing(requests, pushed, sessions, session.worker_id):
            if isinstance(request, list):
                yield pb.WorkerSessionResponse(grants=[grant_to_pb(g) for g in request])
                continue
            for field in ("worker_id", "incarnation", "runnable_definitions"):
                if getattr(request, field):
                    raise _misplaced(field, "only in the first message")
            if request.goodbye:
                await sessions.goodbye(session)
                clean = True
                yield _CLOSED
                return
            if not _report_slots(waiting, session.id, request):
                yield _PONG
    finally:
        live = False
        if waiting is not None:
            waiting.close(session.id)
            unsent = [g for _ in range(pushed.qsize()) for g in pushed.get_nowait()]
            if unsent:
                grants.hand_back(session.worker_id, unsent)
        if not clean:
            sessions.ended(session)


def _report_slots(
    waiting: WaitingWorkers | None, session_id: int, request: pb.WorkerSessionRequest
) -> bool:
    """Passes on the request's slot report, if it carries one (then it is not answered)."""
    if not request.reports_slots:
        return False
    if waiting is not None:
        free = {s.queue: s.slots for s in request.free_slots}
        waiting.report(session_id, free, request.grants_taken)
    return True


async def _until_closing(
    requests: AsyncIterator[pb.WorkerSessionRequest],
    pushed: asyncio.Queue[list[LockGrant]],
    sessions: WorkerSessions,
    worker_id: str,
) -> AsyncIterator[pb.WorkerSessionRequest | list[LockGrant]]:
    """The requests and the grants pushed to send, until the stream ends, this replica
    starts stopping, or the worker sends nothing for the sessions' silence limit (it is
    frozen, or cut off behind a connection that stays up: the session ends as a
    disconnect)."""
    loop = asyncio.get_running_loop()
    silence_s = sessions.silence_s
    stopping = asyncio.ensure_future(sessions.closing.wait())
    reading: asyncio.Future[pb.WorkerSessionRequest | None] | None = None
    sending: asyncio.Future[list[LockGrant]] | None = None
    heard = loop.time()
    try:
        while True:
            if reading is None:
                reading = asyncio.ensure_future(anext(requests, None))
            if sending is None:
                sending = asyncio.ensure_future(pushed.get())
            waits: set[asyncio.Future[Any]] = {reading, sending, stopping}
            await asyncio.wait(
                waits,
                timeout=max(0.0, heard + silence_s - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if sending.done():
                grants, sending = sending.result(), None
                yield grants
            elif reading.done():
                request, reading, heard = reading.result(), None, loop.time()
                if request is None:
                    return
                yield request
            else:
                if not stopping.done():
                    log.info("worker %s: no ping for %.1fs; session ended", worker_id, silence_s)
                return
    finally:
        stopping.cancel()
        if reading is not None:
            reading.cancel()
        if sending is not None and sending.done() and not sending.cancelled():
            pushed.put_nowait(sending.result())  # not sent: handed back with the rest
        elif sending is not None:
            sending.cancel()


def _misplaced(field: str, rule: str) -> InvalidInput:
    return InvalidInput(f"{field} is misplaced in the session", [FieldViolation(field, rule)])
