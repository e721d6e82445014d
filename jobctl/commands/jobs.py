"""A job's life: create, get, cancel, list, watch, retry, and its graph: tree."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient, JobsError, Partial, RetryPolicy, create_request
from durable_jobs_client.protos import job_pb2, job_service_pb2

from jobctl import graph, render, timespec
from jobctl.commands import Commands
from jobctl.exits import Exit, UsageError
from jobctl.output import for_machines, show

# A watch outlives a job service restart (a deploy): it reconnects for about a minute.
WATCH_RECONNECT = RetryPolicy(attempts=30, initial_backoff=0.2, max_backoff=2.0)

_ENDED = {
    job_pb2.JOB_STATUS_SUCCEEDED: Exit.OK,
    job_pb2.JOB_STATUS_FAILED: Exit.JOB_FAILED,
    job_pb2.JOB_STATUS_CANCELLED: Exit.JOB_CANCELLED,
}

# --dependency-policy: what a dependency that fails or is cancelled does to the job.
POLICIES = {
    "run": job_pb2.DEPENDENCY_POLICY_RUN,
    "fail": job_pb2.DEPENDENCY_POLICY_FAIL,
    "cancel": job_pb2.DEPENDENCY_POLICY_CANCEL,
}


def register(commands: Commands) -> None:
    p = commands.add("create", create, "create a job")
    p.add_argument("job_type")
    p.add_argument("-i", "--input", help="the input, a JSON object")
    p.add_argument("--input-file", help="read the input from a file (- for stdin)")
    p.add_argument("--key", help="idempotency key (default: one made for this call)")
    p.add_argument(
        "--priority",
        type=int,
        help="-1000..1000, higher runs first (default: the job type's); one level is worth "
        "JOBS_SCHED_PRIORITY_STEP_S seconds of waiting",
    )
    p.add_argument("--credential", help="run on your own stored provider key (its id)")
    p.add_argument("--watch", action="store_true", help="then watch it until it ends")
    p.add_argument(
        "--depends-on",
        action="append",
        default=[],
        metavar="JOB_ID",
        help="wait (created) until this job of yours has ended; repeat for each job it "
        "waits for (fan-in); not with --run-at or --delay",
    )
    p.add_argument(
        "--dependency-policy",
        choices=sorted(POLICIES),
        help="with --depends-on, when a dependency fails or is cancelled: run anyway, fail "
        "(the default) or cancel this job without running it",
    )
    later = p.add_mutually_exclusive_group()
    later.add_argument(
        "--run-at",
        type=timespec.run_at,
        metavar="TIME",
        help="run it at this RFC 3339 time, e.g. 2030-01-31T09:00:00Z (stored as created)",
    )
    later.add_argument(
        "--delay",
        type=timespec.delay,
        metavar="DURATION",
        help="run it this long from now: seconds, or e.g. 90s, 5m, 1h, 2d",
    )

    p = commands.add("get", get, "show a job with its output and timeline")
    p.add_argument("job_id")
    p.add_argument("--admin", action="store_true", help="any user's job (AdminService)")

    p = commands.add(
        "tree",
        tree,
        "draw a job's graph: the jobs it depends on, its children and the jobs that depend "
        "on it, and theirs (short ids; -o json for the whole ids)",
    )
    p.add_argument("job_id")
    p.add_argument("--admin", action="store_true", help="any user's jobs (AdminService)")
    p.add_argument(
        "--depth",
        type=_at_least_one,
        default=graph.DEFAULT_DEPTH,
        help=f"links to follow from the job (default {graph.DEFAULT_DEPTH})",
    )
    p.add_argument(
        "--max-jobs",
        type=_at_least_one,
        default=graph.DEFAULT_MAX_JOBS,
        help=f"jobs to read at most (default {graph.DEFAULT_MAX_JOBS}); the last line says "
        "what was left out",
    )

    commands.add("cancel", cancel, "cancel a job").add_argument("job_id")

    p = commands.add("list", list_jobs, "list jobs, newest first")
    p.add_argument("--limit", type=int, default=20, help="page size")
    p.add_argument("--page-token")
    p.add_argument("--admin", action="store_true", help="every user's jobs (AdminService)")
    p.add_argument("--type", help="with --admin: job type")
    p.add_argument("--status", choices=render.STATUSES, help="with --admin")
    p.add_argument("--queue", help="with --admin")
    p.add_argument("--user-filter", help="with --admin: one user's jobs")

    p = commands.add(
        "watch", watch, "follow a job until it ends (exit 0/4/5); reconnects if the stream breaks"
    )
    p.add_argument("job_id")
    p.add_argument(
        "--partial",
        action="store_true",
        help="also print the model's text as it is generated (best effort: pieces may be "
        "missed; the job's output is the truth)",
    )

    p = commands.add("retry", retry, "run a failed or cancelled job again, as a new job")
    p.add_argument("job_id")
    p.add_argument("--watch", action="store_true")
    p.add_argument(
        "--idempotency-key",
        default="",
        help="the same key answers the retry it made (and lets a lost answer be retried)",
    )


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1")
    return value


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


async def create(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    if args.depends_on:
        response = await _create_after(args, client)
    else:
        if args.dependency_policy:
            raise UsageError("--dependency-policy goes with --depends-on")
        response = await client.create(
            args.job_type,
            _input(args),
            idempotency_key=args.key,
            priority=args.priority,
            run_at=args.run_at,
            delay=args.delay,
            credential_id=args.credential or "",
        )
    verb = "created" if response.created else "exists"
    if args.watch:
        if not for_machines(args):
            print(f"{verb} {response.job.id}", file=out)
        return await follow(args, client, out, response.job.id)
    show(args, out, response, f"{verb}\n{render.job_detail(response.job)}")
    return Exit.OK


async def _create_after(
    args: argparse.Namespace, client: AsyncJobsClient
) -> job_service_pb2.CreateJobResponse:
    """``create --depends-on``: the client library's ``create`` takes no dependencies, so
    the request is built here and sent as a batch of one (CreateJobs judges each item
    exactly as CreateJob does)."""
    if args.run_at or args.delay:
        raise UsageError("--depends-on cannot go with --run-at or --delay")
    request = create_request(
        client.user_id,
        args.job_type,
        _input(args),
        idempotency_key=args.key,
        priority=args.priority,
        credential_id=args.credential or "",
    )
    request.depends_on.extend(args.depends_on)
    if args.dependency_policy:
        request.dependency_policy = POLICIES[args.dependency_policy]
    [answer] = await client.create_many([request])
    if isinstance(answer, JobsError):
        raise answer
    return answer


async def tree(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    read = client.admin.get_job if args.admin else client.get
    walked = await graph.walk(read, args.job_id, args.depth, args.max_jobs)
    jobs = [render.tree_job(job) for job in walked.jobs.values()]
    show(args, out, render.tree_json(walked), render.job_tree(walked), items=jobs)
    return Exit.OK


async def get(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    job = await (client.admin.get_job(args.job_id) if args.admin else client.get(args.job_id))
    show(args, out, job, render.job_detail(job))
    return Exit.OK


async def cancel(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    job = await client.cancel(args.job_id)
    show(args, out, job, f"{job.id}  {render.status_name(job.status)}")
    return Exit.OK


async def list_jobs(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    """One page (``--page-token`` for the next): a listing a person reads, not a dump."""
    response: Any
    if args.admin:
        response = await client.admin.list_jobs(
            job_type=args.type or "",
            status=render.status_value(args.status) if args.status else None,
            queue=args.queue or "",
            user_id=args.user_filter or "",
            page_size=args.limit,
            page_token=args.page_token or "",
        )
    else:
        response = await client.list_page(page_size=args.limit, page_token=args.page_token or "")
    human = render.jobs_table(response.jobs)
    if response.next_page_token:
        human += f"\nmore: --page-token {response.next_page_token}"
    show(args, out, response, human, items=response.jobs)
    return Exit.OK


async def watch(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    if args.partial:
        return await follow_partial(args, client, out, args.job_id)
    return await follow(args, client, out, args.job_id)


async def follow(
    args: argparse.Namespace, client: AsyncJobsClient, out: TextIO, job_id: str
) -> Exit:
    """Until the job is terminal: for people, a line per status change and a live progress
    bar (on a terminal); with -o json/jsonl, one JSON object per change (JSON Lines). The
    client's watch reconnects when the stream breaks (a job service restart) and shows no
    state twice."""
    machines = for_machines(args)
    live = out.isatty() and not machines
    last: tuple[int, int] | None = None
    job: job_pb2.Job | None = None
    async for job in client.watch(job_id, retry=WATCH_RECONNECT):
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
    if job is None or not render.is_terminal(job):
        print("jobctl: the watch ended before the job did", file=sys.stderr)
        return Exit.UNAVAILABLE
    return _ENDED[job.status]


async def follow_partial(
    args: argparse.Namespace, client: AsyncJobsClient, out: TextIO, job_id: str
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
    async for seen in client.watch(job_id, retry=WATCH_RECONNECT, partial_output=True):
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
    if job is None or not render.is_terminal(job):
        print("jobctl: the watch ended before the job did", file=sys.stderr)
        return Exit.UNAVAILABLE
    return _ENDED[job.status]


async def retry(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    job = await client.admin.retry_job(args.job_id, idempotency_key=args.idempotency_key)
    show(args, out, job, f"retried as {job.id}")
    if args.watch:
        return await follow(args, client, out, job.id)
    return Exit.OK
