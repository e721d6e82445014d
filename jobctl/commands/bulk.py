"""Many jobs at once, for operators: ``cancel-many`` and ``retry-many`` (AdminService
CancelJobs / RetryJobs).

Both first count what the selection matches (a dry run), say it, and ask before acting
(``--yes`` in scripts; ``--dry-run`` stops after the count and lists the first jobs it
would touch, by short id). ``--id`` takes whole or short ids; ``--user`` keeps one user's
jobs (``--user-filter``, its name before, still works). The service acts on at most
``--limit`` jobs per call; the command follows the continuation until nothing is left,
with a progress line per call on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient, job_selection
from durable_jobs_client.errors import error_from_status
from durable_jobs_client.protos import admin_service_pb2 as apb

from jobctl import render, timespec
from jobctl.commands import Commands
from jobctl.exits import Exit, UsageError
from jobctl.ids import short_id
from jobctl.lookup import any_id
from jobctl.output import fmt, show
from jobctl.prompt import confirmed

_OK = 0  # google.rpc.Code.OK
# Jobs a dry run names (the rest are counted).
SAMPLE = 20


def register(commands: Commands) -> None:
    for name, run, verb in (
        ("cancel-many", cancel_many, "cancel the unfinished jobs"),
        ("retry-many", retry_many, "retry (as new jobs) the failed or cancelled jobs"),
    ):
        p = commands.add(name, run, f"{verb} that match the filters or ids (admin)")
        p.add_argument(
            "--id",
            action="append",
            default=[],
            dest="ids",
            metavar="JOB_ID",
            help="a job's whole id or its last 8 characters (repeat)",
        )
        p.add_argument("--type", help="job type")
        p.add_argument("--status", choices=render.STATUSES)
        p.add_argument("--queue")
        # One user's jobs: --user, as every command names a user; --user-filter was its
        # name here before (hidden, kept for scripts).
        p.add_argument("--user-filter", help=argparse.SUPPRESS)
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
        p.add_argument(
            "--dry-run", action="store_true", help="only count and list them; change nothing"
        )


def _user(args: argparse.Namespace) -> str:
    """The one user whose jobs are selected: ``--user`` (or ``--user-filter``); none: every
    user's."""
    return str(args.user_filter or args.user or "")


async def selection(args: argparse.Namespace, client: AsyncJobsClient) -> apb.JobSelection:
    filters = (
        args.type,
        args.status,
        args.queue,
        _user(args),
        args.created_after,
        args.created_before,
        args.target_type,
        args.target_id,
    )
    if not args.ids and not any(filters):
        raise UsageError("name the jobs: --id, or at least one filter (--type, --status, ...)")
    return job_selection(
        job_ids=[await any_id(client, text) for text in args.ids],
        job_type=args.type or "",
        status=render.status_value(args.status) if args.status else None,
        queue=args.queue or "",
        user_id=_user(args),
        created_after=args.created_after,
        created_before=args.created_before,
        target_type=args.target_type or "",
        target_id=args.target_id or "",
    )


def progress(line: str) -> None:
    print(f"jobctl: {line}", file=sys.stderr, flush=True)


def _counted(
    args: argparse.Namespace, out: TextIO, answer: Any, job_ids: Sequence[str], action: str
) -> Exit:
    """The dry run's answer, for --dry-run: the count and the first jobs it names."""
    matched = int(answer.matched)
    verb = "matches" if matched == 1 else "match"
    human = f"{render.count(matched, 'job')} {verb}; {action} none (dry run)"
    if matched:
        human += "\n" + sample(job_ids, matched)
    show(args, out, answer, human)
    return Exit.OK


def sample(job_ids: Sequence[str], matched: int, shown: int = SAMPLE) -> str:
    """The first ``shown`` ids, short, four to a line, and how many more match."""
    first = [short_id(job_id) for job_id in job_ids[:shown]]
    lines = ["  " + "  ".join(first[i : i + 4]) for i in range(0, len(first), 4)]
    if more := matched - len(first):
        lines.append(f"  and {more} more")
    return "\n".join(lines)


def _retryable(counted: apb.RetryJobsResponse) -> list[str]:
    """The jobs a retry dry run says it would retry (an id naming no job is refused)."""
    return [o.job_id for o in counted.outcomes if o.status.code == _OK]


def _ask(verb: str, matched: int, job_ids: Sequence[str]) -> bool:
    """The question, after the first jobs it is about (on stderr, as the question)."""
    if sys.stdin.isatty():
        print(sample(job_ids, matched), file=sys.stderr)
    return confirmed(f"{verb} {render.count(matched, 'job')}?")


async def cancel_many(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    which = await selection(args, client)
    counted = await client.admin.cancel_jobs(which, dry_run=True, limit=args.limit)
    if args.dry_run:
        return _counted(args, out, counted, counted.job_ids, "cancelled")
    if counted.matched == 0:
        show(args, out, apb.CancelJobsResponse(), "no jobs match; nothing cancelled")
        return Exit.OK
    if not args.yes and not _ask("Cancel", counted.matched, counted.job_ids):
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
        cancelled = render.count(total.cancelled, "job")
        human = f"cancelled {cancelled} ({total.skipped} already finished, left)"
        show(args, out, total, human)
    return Exit.OK


async def retry_many(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    which = await selection(args, client)
    counted = await client.admin.retry_jobs(which, dry_run=True, limit=args.limit)
    if args.dry_run:
        return _counted(args, out, counted, _retryable(counted), "retried")
    if counted.matched == 0:
        show(args, out, apb.RetryJobsResponse(), "no jobs match; nothing retried")
        return Exit.OK
    if not args.yes and not _ask("Retry", counted.matched, _retryable(counted)):
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
        as_new = "as a new job" if total.retried == 1 else "as new jobs"
        human = f"retried {render.count(total.retried, 'job')} {as_new} ({len(refused)} refused)"
        show(args, out, total, human)
    # a partial success is not a success for a script: it says which were refused
    return Exit.REFUSED if refused else Exit.OK
