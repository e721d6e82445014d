"""The WorkerSession stream as the worker holds it: opened, pinged every interval the job
service asked for, and ended with a goodbye (see ``ports.SessionApi``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from shared.pb.jobs.v1 import executor_service_pb2 as pb
from worker_service.domain.errors import ExecutorUnreachable

# How long the job service gets to answer a worker's goodbye.
GOODBYE_TIMEOUT_S = 2.0


async def hold(
    call: grpc.aio.StreamStreamCall,
    worker_id: str,
    incarnation: str,
    goodbye: asyncio.Event,
    opened: Callable[[str], None],
) -> None:
    """Hold one session on ``call``: hello (the worker and its process), a ping every
    interval the job service asked for, and a goodbye once ``goodbye`` is set; raises if
    the stream ends before that."""
    await call.write(pb.WorkerSessionRequest(worker_id=worker_id, incarnation=incarnation))
    first = await call.read()
    if first is grpc.aio.EOF:
        raise ExecutorUnreachable("the job service ended the session at once")
    opened(first.session_id)
    interval = max(0.05, first.ping_interval_ms / 1000)
    answers = asyncio.ensure_future(_until_closed(call))
    leaving = asyncio.ensure_future(goodbye.wait())
    try:
        while True:
            await asyncio.wait({answers, leaving}, timeout=interval, return_when="FIRST_COMPLETED")
            if answers.done():
                answers.result()  # raises the stream's failure
                raise ExecutorUnreachable("the job service ended the session")
            if leaving.done():
                break
            await call.write(pb.WorkerSessionRequest())  # a ping: data both ways
        await call.write(pb.WorkerSessionRequest(goodbye=True))
        await call.done_writing()
        await asyncio.wait({answers}, timeout=GOODBYE_TIMEOUT_S)
    finally:
        answers.cancel()
        leaving.cancel()


async def _until_closed(call: grpc.aio.StreamStreamCall) -> bool:
    """Reads the session's answers (pongs) until ``closed`` (True) or the end (False)."""
    while True:
        answer = await call.read()
        if answer is grpc.aio.EOF:
            return False
        if answer.closed:
            return True
