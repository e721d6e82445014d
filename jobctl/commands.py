"""The commands: each takes its parsed arguments and the stubs, prints, and returns an exit
status (``jobctl.exits``). gRPC errors are left to the caller, which maps them."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

import grpc

from jobctl import render
from jobctl.exits import Exit
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import admin_service_pb2_grpc, job_pb2, job_service_pb2_grpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict

# Polling interval when the server has no WatchJob (a job service older than the API).
POLL_INTERVAL_S = 0.5
CALL_TIMEOUT_S = 30.0

_ENDED = {
    job_pb2.JOB_STATUS_SUCCEEDED: Exit.OK,
    job_pb2.JOB_STATUS_FAILED: Exit.JOB_FAILED,
    job_pb2.JOB_STATUS_CANCELLED: Exit.JOB_CANCELLED,
}


class Stubs:
    def __init__(self, channel: grpc.aio.Channel, user_id: str) -> None:
        self.jobs = job_service_pb2_grpc.JobServiceStub(channel)  # type: ignore[no-untyped-call]
        self.admin = admin_service_pb2_grpc.AdminServiceStub(channel)  # type: ignore[no-untyped-call]
        self.user_id = user_id


class UsageError(Exception):
    """Arguments that parse but make no sense (e.g. input that is not a JSON object)."""


def _input(args: argparse.Namespace) -> dict[str, Any]:
    text = args.input
    if args.input_file is not None:
        text = sys.stdin.read() if args.input_file == "-" else Path(args.input_file).read_text()
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise UsageError(f"--input is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise UsageError("--input must be a JSON object")
    return value


def _show(args: argparse.Namespace, out: TextIO, message: Any, human: str) -> None:
    print(render.as_json(message) if args.json else human, file=out)


async def create(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    request = jpb.CreateJobRequest(
        user_id=stubs.user_id,
        job_type=args.job_type,
        input=struct_from_dict(_input(args)),
        idempotency_key=args.key or "",
    )
    if args.priority is not None:
        request.priority = args.priority
    if args.credential:  # the user's own provider key (CredentialService), by id
        request.credential_mode = job_pb2.CREDENTIAL_MODE_USER
        request.credential_id = args.credential
    if args.run_at is not None:
        request.run_at.FromDatetime(args.run_at)
    if args.delay is not None:
        request.delay.FromTimedelta(args.delay)
    response = await stubs.jobs.CreateJob(request, timeout=CALL_TIMEOUT_S)
    if args.watch:
        if not args.json:
            verb = "created" if response.created else "exists"
            print(f"{verb} {response.job.id}", file=out)
        return await _watch(args, stubs, out, response.job.id)
    human = f"{'created' if response.created else 'exists'}\n{render.job_detail(response.job)}"
    _show(args, out, response, human)
    return Exit.OK


async def get(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    if args.admin:
        job = (
            await stubs.admin.GetJob(
                apb.AdminGetJobRequest(job_id=args.job_id), timeout=CALL_TIMEOUT_S
            )
        ).job
    else:
        job = (
            await stubs.jobs.GetJob(
                jpb.GetJobRequest(job_id=args.job_id, user_id=stubs.user_id),
                timeout=CALL_TIMEOUT_S,
            )
        ).job
    _show(args, out, job, render.job_detail(job))
    return Exit.OK


async def cancel(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    response = await stubs.jobs.CancelJob(
        jpb.CancelJobRequest(job_id=args.job_id, user_id=stubs.user_id), timeout=CALL_TIMEOUT_S
    )
    _show(args, out, response.job, f"{response.job.id}  {render.status_name(response.job.status)}")
    return Exit.OK


async def list_jobs(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    response: Any
    if args.admin:
        request = apb.AdminListJobsRequest(
            job_type=args.type or "",
            queue=args.queue or "",
            user_id=args.user_filter or "",
            page_size=args.limit,
            page_token=args.page_token or "",
        )
        if args.status:
            request.status = job_pb2.JobStatus.Value(f"JOB_STATUS_{args.status.upper()}")  # type: ignore[assignment]
        response = await stubs.admin.ListJobs(request, timeout=CALL_TIMEOUT_S)
    else:
        response = await stubs.jobs.ListJobs(
            jpb.ListJobsRequest(
                user_id=stubs.user_id, page_size=args.limit, page_token=args.page_token or ""
            ),
            timeout=CALL_TIMEOUT_S,
        )
    human = render.jobs_table(response.jobs)
    if response.next_page_token:
        human += f"\nmore: --page-token {response.next_page_token}"
    _show(args, out, response, human)
    return Exit.OK


async def watch(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    return await _watch(args, stubs, out, args.job_id)


async def _watch(args: argparse.Namespace, stubs: Stubs, out: TextIO, job_id: str) -> Exit:
    """Until the job is terminal: for people, a line per status change and a live
    progress bar (on a terminal); with --json, one JSON object per change (JSON Lines)."""
    live = out.isatty() and not args.json
    last: tuple[int, int] | None = None
    job: job_pb2.Job | None = None
    async for job in _updates(stubs, job_id):
        key = (job.status, job.attempt_count)
        if args.json:
            if key != last or live:
                print(render.as_json(job), file=out, flush=True)
        else:
            if live:
                print("\r\033[K", end="", file=out)
            if key != last:
                print(render.status_change(job), file=out)
            if live and not render.is_terminal(job):
                print(render.progress_line(job), end="", file=out)
            out.flush()
        last = key
        if render.is_terminal(job):
            break
    if job is None or not render.is_terminal(job):
        print("jobctl: the watch ended before the job did", file=sys.stderr)
        return Exit.UNAVAILABLE
    return _ENDED[job.status]


async def _updates(stubs: Stubs, job_id: str) -> AsyncIterator[job_pb2.Job]:
    """The job's states from WatchJob, or from polling GetJob against a job service
    without WatchJob."""
    request = jpb.WatchJobRequest(job_id=job_id, user_id=stubs.user_id)
    try:
        async for response in stubs.jobs.WatchJob(request):
            yield response.job
        return
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise
    get_request = jpb.GetJobRequest(job_id=job_id, user_id=stubs.user_id)
    while True:
        job = (await stubs.jobs.GetJob(get_request, timeout=CALL_TIMEOUT_S)).job
        yield job
        if render.is_terminal(job):
            return
        await asyncio.sleep(POLL_INTERVAL_S)


async def retry(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    response = await stubs.admin.RetryJob(
        apb.RetryJobRequest(job_id=args.job_id), timeout=CALL_TIMEOUT_S
    )
    _show(args, out, response.job, f"retried as {response.job.id}")
    if args.watch:
        return await _watch(args, stubs, out, response.job.id)
    return Exit.OK


async def definitions(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    response = await stubs.admin.ListJobDefinitions(
        apb.ListJobDefinitionsRequest(), timeout=CALL_TIMEOUT_S
    )
    _show(args, out, response, render.definitions_table(response.definitions))
    return Exit.OK


async def queues(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    response = await stubs.admin.ListQueues(apb.ListQueuesRequest(), timeout=CALL_TIMEOUT_S)
    _show(args, out, response, render.queues_table(response.queues))
    return Exit.OK


def confirmed(question: str) -> bool:
    """Asks on the terminal (the question on stderr, so stdout stays the answer's): only
    ``y`` or ``yes`` is a yes. Without a terminal to ask on, a usage error: scripts say
    ``--yes``."""
    if not sys.stdin.isatty():
        raise UsageError(
            f"{question} Refusing without confirmation: stdin is not a terminal; "
            "add --yes to confirm."
        )
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


async def pause(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    if not args.yes:
        # Read first, to name the queue's work in the question (and to refuse a name that
        # is no queue before asking anything).
        listed = await stubs.admin.ListQueues(apb.ListQueuesRequest(), timeout=CALL_TIMEOUT_S)
        known = {q.name: q for q in listed.queues}
        if args.queue not in known:
            raise UsageError(
                f"no queue named {args.queue!r}; the queues are: {', '.join(sorted(known))}"
            )
        queue = known[args.queue]
        question = (
            f"Pause queue {queue.name}? No more of its jobs start ({queue.waiting} waiting); "
            f"the {queue.running} running finish."
        )
        if not confirmed(question):
            print(f"jobctl: not confirmed; queue {args.queue} was not paused", file=sys.stderr)
            return Exit.NOT_CONFIRMED
    response = await stubs.admin.PauseQueue(
        apb.PauseQueueRequest(queue=args.queue), timeout=CALL_TIMEOUT_S
    )
    info = response.queue
    _show(
        args,
        out,
        info,
        f"paused {info.name}: {info.waiting} waiting, {info.running} running (they finish)",
    )
    return Exit.OK


async def resume(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    response = await stubs.admin.ResumeQueue(
        apb.ResumeQueueRequest(queue=args.queue), timeout=CALL_TIMEOUT_S
    )
    info = response.queue
    _show(args, out, info, f"resumed {info.name}: {info.waiting} waiting, {info.running} running")
    return Exit.OK


async def rate_limits(args: argparse.Namespace, stubs: Stubs, out: TextIO) -> Exit:
    response = await stubs.admin.ListRateLimits(apb.ListRateLimitsRequest(), timeout=CALL_TIMEOUT_S)
    _show(args, out, response, render.rate_limits_table(response.limits))
    return Exit.OK
