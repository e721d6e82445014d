"""Many jobs at once, for operators: ``cancel-many`` and ``retry-many`` (AdminService
CancelJobs / RetryJobs).

Both first count what the selection matches (a dry run), say it, and ask before acting
(``--yes`` in scripts; ``--dry-run`` stops after the count). The service acts on at most
``--limit`` jobs per call; the command follows the continuation until nothing is left,
with a progress line per call on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient, job_selection
from durable_jobs_client.errors import error_from_status
from durable_jobs_client.protos import admin_service_pb2 as apb

from jobctl import render, timespec
from jobctl.commands import Commands
from jobctl.exits import Exit, UsageError
from jobctl.output import fmt, show
from jobctl.prompt import confirmed

_OK = 0  # google.rpc.Code.OK


def register(commands: Commands) -> None:
    for name, run, verb in (
        ("cancel-many", cancel_many, "cancel the unfinished jobs"),
        ("retry-many", retry_many, "retry (as new jobs) the failed or cancelled jobs"),
    ):
        p = commands.add(name, run, f"{verb} that match the filters or ids (admin)")
        p.add_argument("--id", action="append", default=[], dest="ids", help="a job id (repeat)")
        p.add_argument("--type", help="job type")
        p.add_argument("--status", choices=render.STATUSES)
        p.add_argument("--queue")
        p.add_argument("--user-filter", help="one user's jobs")
        p.add_argument(
            "--created-after", type=timespec.run_at, metavar="TIME", help="RFC 3339, inclusive"
        )
        p.add_argument(
            "--created-before", type=timespec.run_at, metavar="TIME", help="RFC 3339, exclusive"
        )
        p.add_argument("--target-type", help="jobs about this target type")
        p.add_argument("--target-id", help="and this target id")
        p.add_argument("--reason", default="", help="recorded on each job's timeline")
        p.add_argument("--limit", type=int, default=0, help="jobs per call (default: 100)")
        p.add_argument("--dry-run", action="store_true", help="only count; change nothing")
        p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def selection(args: argparse.Namespace) -> apb.JobSelection:
    filters = (
        args.type,
        args.status,
        args.queue,
        args.user_filter,
        args.created_after,
        args.created_before,
        args.target_type,
        args.target_id,
    )
    if not args.ids and not any(filters):
        raise UsageError("name the jobs: --id, or at least one filter (--type, --status, ...)")
    return job_selection(
        job_ids=args.ids,
        job_type=args.type or "",
        status=render.status_value(args.status) if args.status else None,
        queue=args.queue or "",
        user_id=args.user_filter or "",
        created_after=args.created_after,
        created_before=args.created_before,
        target_type=args.target_type or "",
        target_id=args.target_id or "",
    )


def progress(line: str) -> None:
    print(f"jobctl: {line}", file=sys.stderr, flush=True)


def _counted(args: argparse.Namespace, out: TextIO, answer: Any, action: str) -> Exit:
    """The dry run's answer, for --dry-run."""
    show(args, out, answer, f"{answer.matched} jobs match; {action} none (dry run)")
    return Exit.OK


def _ask(verb: str, matched: int) -> bool:
    return confirmed(f"{verb} {matched} jobs?")


async def cancel_many(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    which = selection(args)
    counted = await client.admin.cancel_jobs(which, dry_run=True, limit=args.limit)
    if args.dry_run:
        return _counted(args, out, counted, "cancelled")
    if counted.matched == 0:
        show(args, out, apb.CancelJobsResponse(), "no jobs match; nothing cancelled")
        return Exit.OK
    if not args.yes and not _ask("Cancel", counted.matched):
        print("jobctl: not confirmed; nothing was cancelled", file=sys.stderr)
        return Exit.NOT_CONFIRMED
    total = apb.CancelJobsResponse(matched=counted.matched)
    token = ""
    while True:
        page = await client.admin.cancel_jobs(
            which, limit=args.limit, page_token=token, reason=args.reason
        )
        total.cancelled += page.cancelled
        total.skipped += page.skipped
        total.job_ids.extend(page.job_ids)
        if fmt(args) == "jsonl":
            print(render.as_json(page), file=out, flush=True)
        progress(
            f"cancelled {total.cancelled + total.skipped}/{total.matched} "
            f"({total.skipped} already finished)"
        )
        token = page.next_page_token
        if not token:
            break
    if fmt(args) != "jsonl":
        human = f"cancelled {total.cancelled} jobs ({total.skipped} already finished, left)"
        show(args, out, total, human)
    return Exit.OK


async def retry_many(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    which = selection(args)
    counted = await client.admin.retry_jobs(which, dry_run=True, limit=args.limit)
    if args.dry_run:
        return _counted(args, out, counted, "retried")
    if counted.matched == 0:
        show(args, out, apb.RetryJobsResponse(), "no jobs match; nothing retried")
        return Exit.OK
    if not args.yes and not _ask("Retry", counted.matched):
        print("jobctl: not confirmed; nothing was retried", file=sys.stderr)
        return Exit.NOT_CONFIRMED
    total = apb.RetryJobsResponse(matched=counted.matched)
    token = ""
    while True:
        page = await client.admin.retry_jobs(
            which, limit=args.limit, page_token=token, reason=args.reason
        )
        total.retried += page.retried
        total.outcomes.extend(page.outcomes)
        if fmt(args) == "jsonl":
            print(render.as_json(page), file=out, flush=True)
        progress(f"retried {total.retried}/{total.matched}")
        token = page.next_page_token
        if not token:
            break
    refused = [o for o in total.outcomes if o.status.code != _OK]
    for outcome in refused:
        error = error_from_status(outcome.status)
        print(f"  {outcome.job_id}: {error.reason}: {error}", file=sys.stderr)
    if fmt(args) != "jsonl":
        human = f"retried {total.retried} jobs as new jobs ({len(refused)} refused)"
        show(args, out, total, human)
    # a partial success is not a success for a script: it says which were refused
    return Exit.REFUSED if refused else Exit.OK
