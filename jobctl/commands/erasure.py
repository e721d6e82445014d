"""``erase-user``: one user's data erased for good (AdminService.EraseUserData, admin).

It first counts what would go (a dry run) and says it; ``--dry-run`` stops there. Then it
asks (``--yes`` in scripts): the user's data key is destroyed, so every payload of theirs,
backups included, stops opening, and their jobs, schedules and stored provider keys are
deleted. A user with unfinished jobs is refused unless ``--cancel-running``: then their
jobs are cancelled and the erase is asked again until they have all ended (a running job
ends once its worker stops it), for up to ``--wait`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from durable_jobs_client import AsyncJobsClient, UserHasRunningJobs
from durable_jobs_client.protos import admin_service_pb2 as apb

from jobctl import render
from jobctl.commands import Commands
from jobctl.exits import Exit
from jobctl.output import show
from jobctl.prompt import confirmed

# How often the erase is asked again while cancelled jobs end, and for how long by default.
POLL_S = 0.5
WAIT_S = 60.0


def register(commands: Commands) -> None:
    p = commands.add(
        "erase-user",
        erase_user,
        "erase a user's data for good: their data key, jobs, schedules and stored keys (admin)",
    )
    p.add_argument("erased_user", metavar="USER", help="the user id")
    p.add_argument("--dry-run", action="store_true", help="only count what would go")
    p.add_argument(
        "--cancel-running",
        action="store_true",
        help="cancel the user's unfinished jobs first, and erase once they have ended",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=WAIT_S,
        metavar="SECONDS",
        help=f"with --cancel-running: how long to wait for them to end (default {WAIT_S:g})",
    )


def described(answer: apb.EraseUserDataResponse) -> str:
    """What an answer counts, in words."""
    c = render.count
    parts = [
        f"{c(answer.jobs, 'job')} ({c(answer.artifacts, 'artifact')}, {c(answer.steps, 'step')},"
        f" {c(answer.signals, 'signal')}, {c(answer.events, 'timeline event')})",
        c(answer.schedules, "schedule"),
        c(answer.credentials, "stored key"),
        c(answer.usage_records, "usage record"),
    ]
    return ", ".join(parts)


def _nothing(answer: apb.EraseUserDataResponse) -> bool:
    stored = (answer.jobs, answer.schedules, answer.credentials, answer.data_key_destroyed)
    return not any(stored)


async def erase_user(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    user = args.erased_user
    counted = await client.admin.erase_user_data(user, dry_run=True)
    key = "a data key" if counted.data_key_destroyed else "no data key"
    running = f"; {render.count(counted.unfinished, 'unfinished job')}" * bool(counted.unfinished)
    if args.dry_run:
        human = f"{user}: {described(counted)}, {key}{running}; erased nothing (dry run)"
        show(args, out, counted, human)
        return Exit.OK
    if _nothing(counted):
        show(args, out, apb.EraseUserDataResponse(), f"{user}: nothing stored; nothing erased")
        return Exit.OK
    if counted.unfinished and not args.cancel_running:
        print(
            f"jobctl: {user} has {render.count(counted.unfinished, 'unfinished job')}; "
            "nothing erased: add --cancel-running to cancel them first",
            file=sys.stderr,
        )
        return Exit.REFUSED
    question = f"Erase {user} for good: {described(counted)}, {key}{running}?"
    if not args.yes and not confirmed(question):
        print("jobctl: not confirmed; nothing was erased", file=sys.stderr)
        return Exit.NOT_CONFIRMED
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.wait
    while True:
        try:
            erased = await client.admin.erase_user_data(user, cancel_running=args.cancel_running)
        except UserHasRunningJobs:
            if loop.time() >= deadline:
                raise
            print("jobctl: waiting for the cancelled jobs to end", file=sys.stderr, flush=True)
            await asyncio.sleep(POLL_S)
        else:
            break
    left = f"; {render.count(erased.unfinished, 'job')} made meanwhile left" * bool(
        erased.unfinished
    )
    destroyed = "data key destroyed" if erased.data_key_destroyed else "no data key"
    show(args, out, erased, f"erased {user}: {destroyed}, {described(erased)} deleted{left}")
    return Exit.OK
