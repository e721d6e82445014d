"""ExecutorService.WorkerSession: the stream a worker holds for its lifetime (see
``job_service.usecases.sessions``). The first message names the worker and its process
(incarnation; none from an older worker); then pings, each
answered; a goodbye, answered ``closed``, ends it cleanly. Any other end — the worker's
connection closed, a malformed message, no ping for ``MISSED_PINGS`` intervals — is a
disconnect."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc

from job_service.usecases.sessions import WorkerSessions
from shared.errors import FieldViolation, InvalidInput
from shared.pb.jobs.v1 import executor_service_pb2 as pb

log = logging.getLogger(__name__)

_PONG = pb.WorkerSessionResponse()
_CLOSED = pb.WorkerSessionResponse(closed=True)


async def serve_session(
    sessions: WorkerSessions,
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
    clean = False
    try:
        yield pb.WorkerSessionResponse(
            session_id=str(session.id),
            disconnect_grace_ms=round((sessions.grace_for(session) or 0.0) * 1000),
            ping_interval_ms=round(sessions.ping_interval_s * 1000),
        )
        async for request in _until_closing(requests, sessions, session.worker_id):
            for field in ("worker_id", "incarnation"):
                if getattr(request, field):
                    raise _misplaced(field, "only in the first message")
            if request.goodbye:
                await sessions.goodbye(session)
                clean = True
                yield _CLOSED
                return
            yield _PONG
    finally:
        if not clean:
            sessions.ended(session)


async def _until_closing(
    requests: AsyncIterator[pb.WorkerSessionRequest], sessions: WorkerSessions, worker_id: str
) -> AsyncIterator[pb.WorkerSessionRequest]:
    """The requests, until the stream ends, this replica starts stopping, or the worker
    sends nothing for the sessions' silence limit (it is frozen, or cut off behind a
    connection that stays up: the session ends as a disconnect)."""
    silence_s = sessions.silence_s
    stopping = asyncio.ensure_future(sessions.closing.wait())
    try:
        while True:
            reading = asyncio.ensure_future(anext(requests, None))
            await asyncio.wait(
                {reading, stopping}, timeout=silence_s, return_when=asyncio.FIRST_COMPLETED
            )
            if not reading.done():
                reading.cancel()
                if not stopping.done():
                    log.info("worker %s: no ping for %.1fs; session ended", worker_id, silence_s)
                return
            request = reading.result()
            if request is None:
                return
            yield request
    finally:
        stopping.cancel()


def _misplaced(field: str, rule: str) -> InvalidInput:
    return InvalidInput(f"{field} is misplaced in the session", [FieldViolation(field, rule)])
