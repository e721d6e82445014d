"""The WorkerSession stream as the worker holds it: opened, pinged every interval the job
service asked for, and ended with a goodbye (see ``ports.SessionApi``). With slot reports
(ADR 0009), it also tells the job service the worker's free slots whenever they change (at
most every ``REPORT_GAP_S``) and runs the grants pushed down it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from shared.pb.jobs.v1 import executor_service_pb2 as pb
from worker_service.adapters.executor_messages import locked_job
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.ports import SlotReports

# How long the job service gets to answer a worker's goodbye.
GOODBYE_TIMEOUT_S = 2.0
# Slot reports go out at most this often, and only when the job service's view has drifted
# enough to matter (``SlotReports.drifted``): a busy worker's slots change with every job,
# and what matters to the job service is the count once the burst is over.
REPORT_GAP_S = 0.005
# ... and at least this often, changed or not (then instead of pings): the job service
# pushes only to a worker it heard from lately, so that a frozen worker is not pushed jobs
# it will never run (usecases/waiting_workers.py, REPORT_STALE_S).
REPORT_EVERY_S = 0.25


async def hold(
    call: grpc.aio.StreamStreamCall,
    worker_id: str,
    incarnation: str,
    goodbye: asyncio.Event,
    opened: Callable[[str], None],
    slots: SlotReports | None = None,
) -> None:
    """Hold one session on ``call``: hello (the worker and its process), a ping every
    interval the job service asked for, and a goodbye once ``goodbye`` is set; raises if
    the stream ends before that. With ``slots``: a slot report in the hello and whenever
    they change, and the grants pushed handed to ``slots``."""
    hello = pb.WorkerSessionRequest(worker_id=worker_id, incarnation=incarnation)
    if slots is not None:
        slots.session_opened()
        hello.runnable_definitions.extend(slots.definitions)
        _add_report(hello, slots.report())
    await call.write(hello)
    first = await call.read()
    if first is grpc.aio.EOF:
        raise ExecutorUnreachable("the job service ended the session at once")
    opened(first.session_id)
    interval = max(0.05, first.ping_interval_ms / 1000)
    if slots is not None:
        interval = min(interval, REPORT_EVERY_S)
    answers = asyncio.ensure_future(_until_closed(call, slots))
    leaving = asyncio.ensure_future(goodbye.wait())
    changed = asyncio.ensure_future(slots.changed.wait()) if slots is not None else None
    try:
        while True:
            waits = {answers, leaving} | ({changed} if changed is not None else set())
            await asyncio.wait(waits, timeout=interval, return_when="FIRST_COMPLETED")
            if answers.done():
                answers.result()  # raises the stream's failure
                raise ExecutorUnreachable("the job service ended the session")
            if leaving.done():
                break
            if slots is not None and changed is not None and changed.done():
                await asyncio.sleep(REPORT_GAP_S)  # let a burst of changes settle
                slots.changed.clear()
                changed = asyncio.ensure_future(slots.changed.wait())
                if slots.drifted():
                    request = pb.WorkerSessionRequest()
                    _add_report(request, slots.report())
                    await call.write(request)  # a ping too
                continue
            if slots is not None:  # the interval's report, instead of a ping
                request = pb.WorkerSessionRequest()
                _add_report(request, slots.report())
                await call.write(request)
                continue
            await call.write(pb.WorkerSessionRequest())  # a ping: data both ways
        await call.write(pb.WorkerSessionRequest(goodbye=True))
        await call.done_writing()
        await asyncio.wait({answers}, timeout=GOODBYE_TIMEOUT_S)
    finally:
        answers.cancel()
        leaving.cancel()
        if changed is not None:
            changed.cancel()


def _add_report(request: pb.WorkerSessionRequest, report: tuple[dict[str, int], int]) -> None:
    """Puts ``report`` (free slots per queue, pushed grants taken) on ``request``."""
    free, taken = report
    request.reports_slots = True
    request.grants_taken = taken
    request.free_slots.extend(pb.QueueSlots(queue=q, slots=n) for q, n in sorted(free.items()))


async def _until_closed(call: grpc.aio.StreamStreamCall, slots: SlotReports | None) -> bool:
    """Reads the session's answers (pongs, pushed grants) until ``closed`` (True) or the
    end (False)."""
    while True:
        answer = await call.read()
        if answer is grpc.aio.EOF:
            return False
        if answer.closed:
            return True
        if answer.grants and slots is not None:
            slots.pushed([locked_job(job) for job in answer.grants])
