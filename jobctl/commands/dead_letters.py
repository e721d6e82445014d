"""Dead letters, for operators: the failed jobs and the outbox events that could not be
published (``dead-letters list``), and putting those events back (``dead-letters
redrive``). A failed job is retried with ``retry`` / ``retry-many``."""

from __future__ import annotations

import argparse
from typing import TextIO

from durable_jobs_client import AsyncJobsClient
from durable_jobs_client.protos import admin_service_pb2 as apb

from jobctl import render
from jobctl.commands import Commands
from jobctl.exits import Exit, UsageError
from jobctl.output import show


def register(commands: Commands) -> None:
    group = commands.group("dead-letters", "failed jobs and dead outbox events (admin)")
    p = group.add("list", list_dead_letters, "failed jobs and dead outbox events, newest first")
    p.add_argument("--limit", type=int, default=20, help="page size (of each)")
    p.add_argument("--page-token")
    p = group.add("redrive", redrive, "publish dead outbox events again")
    p.add_argument("event_ids", nargs="*", type=int, metavar="EVENT_ID")
    p.add_argument("--all", action="store_true", help="every dead event")


async def list_dead_letters(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    page = await client.admin.list_dead_letters(
        page_size=args.limit, page_token=args.page_token or ""
    )
    human = "\n\n".join(
        [
            f"failed jobs\n{render.failed_jobs_table(page.failed_jobs)}",
            f"dead outbox events\n{render.dead_events_table(page.dead_events)}",
        ]
    )
    if page.next_page_token:
        human += f"\nmore: --page-token {page.next_page_token}"
    # JSON Lines: one object per line, named for what it is
    items = [{"failed_job": render.as_dict(j)} for j in page.failed_jobs] + [
        {"dead_event": render.as_dict(e)} for e in page.dead_events
    ]
    show(args, out, page, human, items=items)
    return Exit.OK


async def redrive(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    # The API reads no ids as "every dead event": on the command line that takes --all.
    if bool(args.event_ids) == bool(args.all):
        raise UsageError("name the events to redrive (their ids), or --all")
    redriven = await client.admin.redrive_dead_letters(args.event_ids)
    show(
        args,
        out,
        apb.RedriveDeadLettersResponse(redriven=redriven),
        f"redriven {redriven} events: pending again, the dispatcher publishes them",
    )
    return Exit.OK
