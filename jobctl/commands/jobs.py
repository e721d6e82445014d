"""A job's life: create, get, cancel, retry, and its graph: tree. (``list`` is
``commands.listing``, ``watch`` ``commands.watching``.)

Every JOB_ID may be the whole id or its short form (``jobctl.ids``), and may name another
user's job when the token holds the admin role (``jobctl.lookup``): ``get`` and ``tree``
show it as AdminService does, ``cancel`` acts for its owner.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient, JobsError, create_request
from durable_jobs_client.protos import job_pb2, job_service_pb2

from jobctl import graph, render, timespec
from jobctl.commands import Commands, all_users
from jobctl.commands.watching import follow
from jobctl.exits import Exit, UsageError
from jobctl.lookup import any_id, locate, noted, own_id
from jobctl.output import for_machines, show

JOB_ID_HELP = "the whole id or its last 8 characters (as `jobctl list` shows)"

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
        help="wait (created) until this job of yours (whole or short id) has ended; repeat "
        "for each job it waits for (fan-in); not with --run-at or --delay",
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

    p = commands.add("get", get, "show a job: its input, output, retries and timeline")
    p.add_argument("job_id", metavar="JOB_ID", help=JOB_ID_HELP)
    all_users(p, "read it as AdminService shows it (also done for another user's job)")

    p = commands.add(
        "tree",
        tree,
        "draw a job's graph: the jobs it depends on, its children and the jobs that depend "
        "on it, and theirs (short ids; -o json for the whole ids)",
    )
    p.add_argument("job_id", metavar="JOB_ID", help=JOB_ID_HELP)
    all_users(p, "read the jobs through AdminService (also done for another user's job)")
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

    p = commands.add("cancel", cancel, "cancel a job")
    p.add_argument("job_id", metavar="JOB_ID", help=JOB_ID_HELP)
    all_users(p, "look the id up among every user's jobs (also done when you have none)")

    p = commands.add("retry", retry, "run a failed or cancelled job again, as a new job (admin)")
    p.add_argument("job_id", metavar="JOB_ID", help=JOB_ID_HELP)
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
    request.depends_on.extend([await own_id(client, text) for text in args.depends_on])
    if args.dependency_policy:
        request.dependency_policy = POLICIES[args.dependency_policy]
    [answer] = await client.create_many([request])
    if isinstance(answer, JobsError):
        raise answer
    return answer


async def tree(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    located = await locate(client, args.job_id, all_users=args.all_users)
    noted(located, args.all_users)
    read = client.admin.get_job if located.admin_view else client.get
    walked = await graph.walk(read, located.job.id, args.depth, args.max_jobs)
    jobs = [render.tree_job(job) for job in walked.jobs.values()]
    show(args, out, render.tree_json(walked), render.job_tree(walked), items=jobs)
    return Exit.OK


async def get(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    located = await locate(client, args.job_id, all_users=args.all_users)
    noted(located, args.all_users)
    show(args, out, located.job, render.job_detail(located.job))
    return Exit.OK


async def cancel(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    located = await locate(client, args.job_id, all_users=args.all_users)
    noted(located, args.all_users)
    job = await client.cancel(located.job.id, user_id=located.owner or None)
    show(args, out, job, f"{job.id}  {render.status_name(job.status)}")
    return Exit.OK


async def retry(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    job_id = await any_id(client, args.job_id)
    job = await client.admin.retry_job(job_id, idempotency_key=args.idempotency_key)
    show(args, out, job, f"retried {job_id} as {job.id}")
    if args.watch:
        return await follow(args, client, out, job.id, job.user_id or None)
    return Exit.OK
