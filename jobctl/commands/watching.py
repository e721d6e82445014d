"""``jobctl watch``: a job followed until it ends, the exit status saying how (0, 4 or 5).
``create --watch`` and ``retry --watch`` follow the job they made the same way."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from durable_jobs_client import AsyncJobsClient, Partial, RetryPolicy
from durable_jobs_client.protos import job_pb2

from jobctl import render
from jobctl.commands import Commands, all_users
from jobctl.exits import Exit
from jobctl.lookup import locate, noted
from jobctl.output import for_machines

# A watch outlives a job service restart (a deploy): it reconnects for about a minute.
WATCH_RECONNECT = RetryPolicy(attempts=30, initial_backoff=0.2, max_backoff=2.0)

_ENDED = {
    job_pb2.JOB_STATUS_SUCCEEDED: Exit.OK,
    job_pb2.JOB_STATUS_FAILED: Exit.JOB_FAILED,
    job_pb2.JOB_STATUS_CANCELLED: Exit.JOB_CANCELLED,
}


def register(commands: Commands) -> None:
    p = commands.add(
        "watch", watch, "follow a job until it ends (exit 0/4/5); reconnects if the stream breaks"
    )
    p.add_argument("job_id", metavar="JOB_ID", help="the whole id or its last 8 characters")
    p.add_argument(
        "--partial",
        action="store_true",
        help="also print the model's text as it is generated (best effort: pieces may be "
        "missed; the job's output is the truth)",
    )
    all_users(p, "look the id up among every user's jobs (admin; also done when you have none)")


async def watch(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    located = await locate(client, args.job_id, all_users=args.all_users)
    noted(located, args.all_users)
    if args.partial:
        return await follow_partial(args, client, out, located.job.id, located.owner)
    return await follow(args, client, out, located.job.id, located.owner)


def _ended(job: job_pb2.Job | None) -> Exit:
    if job is None or not render.is_terminal(job):
        print("jobctl: the watch ended before the job did", file=sys.stderr)
        return Exit.UNAVAILABLE
    return _ENDED[job.status]


async def follow(
    args: argparse.Namespace,
    client: AsyncJobsClient,
    out: TextIO,
    job_id: str,
    user_id: str | None = None,
) -> Exit:
    """Until the job is terminal: for people, a line per status change and a live progress
    bar (on a terminal); with -o json/jsonl, one JSON object per change (JSON Lines). The
    client's watch reconnects when the stream breaks (a job service restart) and shows no
    state twice. ``user_id``: the job's owner (an admin watching another user's job)."""
    machines = for_machines(args)
    live = out.isatty() and not machines
    last: tuple[int, int] | None = None
    job: job_pb2.Job | None = None
    async for job in client.watch(job_id, user_id=user_id or None, retry=WATCH_RECONNECT):
        key = (job.status, job.attempt_count)
        if machines:
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
    return _ended(job)


async def follow_partial(
    args: argparse.Namespace,
    client: AsyncJobsClient,
    out: TextIO,
    job_id: str,
    user_id: str | None = None,
) -> Exit:
    """``watch --partial``: the status lines as ``follow`` prints them, with the model's
    text inline as it arrives (no progress bar: the text is the live view); with -o
    json/jsonl a JSON line per change and one per piece (``{"partial": {...}}``). A new
    attempt or call starts its text on a new line."""
    machines = for_machines(args)
    last: tuple[int, int] | None = None
    job: job_pb2.Job | None = None
    text_open = False  # text printed since the last newline
    call: tuple[int, int] | None = None
    async for seen in client.watch(
        job_id, user_id=user_id or None, retry=WATCH_RECONNECT, partial_output=True
    ):
        if isinstance(seen, Partial):
            if machines:
                print(render.as_json({"partial": vars(seen)}), file=out, flush=True)
                continue
            if text_open and call != (seen.attempt, seen.call):
                print(file=out)
            call = (seen.attempt, seen.call)
            print(seen.text, end="", file=out, flush=True)
            text_open = not seen.text.endswith("\n") if seen.text else text_open
            continue
        job = seen
        key = (job.status, job.attempt_count)
        if key != last:
            if machines:
                print(render.as_json(job), file=out, flush=True)
            else:
                if text_open:
                    print(file=out)
                    text_open = False
                print(render.status_change(job), file=out, flush=True)
        last = key
    return _ended(job)
