"""``jobctl list``: a page of jobs, newest first, with short ids (``--whole-ids`` and
``-o json`` have the whole ones).

Whose: the user's (``--user``, JOBS_USER_ID, or the login name), or with ``--all-users``
every user's (AdminService: the admin role). ``--type``, ``--status`` and ``--queue``
filter through AdminService, so they need the admin role: they filter the user's jobs,
or every user's with ``--all-users``; without the role they are refused, never ignored.
When the user has no jobs and the token may see other users', jobctl says so and what to
add.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

import grpc
from durable_jobs_client import AsyncJobsClient, JobsError

from jobctl import render
from jobctl.commands import Commands, all_users
from jobctl.exits import Exit, UsageError
from jobctl.output import show

_DENIED = {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED}


def register(commands: Commands) -> None:
    p = commands.add("list", list_jobs, "list your jobs (or every user's), newest first")
    p.add_argument("--limit", type=int, default=20, help="page size")
    p.add_argument("--page-token")
    all_users(p, "every user's jobs, with their users (the admin role)")
    p.add_argument("--type", help="only this job type (the admin role)")
    p.add_argument("--status", choices=render.STATUSES, help="only this status (the admin role)")
    p.add_argument("--queue", help="only this queue's jobs (the admin role)")
    p.add_argument(
        "--whole-ids",
        action="store_true",
        help="whole ids in the table, not their last 8 characters (as docker's --no-trunc)",
    )
    # Before: `--admin --user-filter U`; now `--user U` (or --all-users for everyone's).
    p.add_argument("--user-filter", help=argparse.SUPPRESS)


async def list_jobs(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    """One page (``--page-token`` for the next): a listing a person reads, not a dump."""
    filters: dict[str, Any] = {
        "job_type": args.type or "",
        "status": render.status_value(args.status) if args.status else None,
        "queue": args.queue or "",
    }
    page: dict[str, Any] = {"page_size": args.limit, "page_token": args.page_token or ""}
    every_user = bool(args.all_users or args.user_filter)
    response: Any
    if every_user:
        response = await client.admin.list_jobs(**filters, user_id=args.user_filter or "", **page)
    elif args.type or args.status or args.queue:
        response = await _filtered(client, filters, page)
    else:
        response = await client.list_page(**page)
        if not response.jobs and not args.page_token:
            await _hint_other_users(client)
    human = render.jobs_table(response.jobs, users=every_user, whole_ids=args.whole_ids)
    if response.next_page_token:
        human += f"\nmore: --page-token {response.next_page_token}"
    show(args, out, response, human, items=response.jobs)
    return Exit.OK


async def _filtered(client: AsyncJobsClient, filters: dict[str, Any], page: dict[str, Any]) -> Any:
    """The user's jobs, filtered: ListJobs takes no filters, AdminService's does."""
    try:
        return await client.admin.list_jobs(**filters, user_id=client.user_id, **page)
    except JobsError as error:
        if error.code in _DENIED:
            raise UsageError(
                "--type, --status and --queue filter through AdminService, which this token "
                "may not call (the admin role); `jobctl list` without them lists your jobs"
            ) from None
        raise


async def _hint_other_users(client: AsyncJobsClient) -> None:
    """The user has no jobs: if the token may list every user's and there are some, say
    what to add (on stderr: stdout stays the answer)."""
    try:
        others = await client.admin.list_jobs(page_size=1)
    except JobsError as error:
        if error.code in _DENIED:
            return
        raise
    if others.jobs:
        print(
            f"jobctl: user {client.user_id!r} has no jobs; other users do: add --all-users "
            "for every user's, or --user <id> for one user's",
            file=sys.stderr,
        )
