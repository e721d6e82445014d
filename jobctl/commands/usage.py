"""``jobctl usage``: what provider calls cost (UsageService), over whole UTC days, as a
table with a TOTAL row (cost in US dollars, exact to six decimals). The user's, or with
``--all-users`` every user's; when the user has none, jobctl says what to add."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TextIO

from durable_jobs_client import AsyncJobsClient
from durable_jobs_client.usage import Grouping

from jobctl import render
from jobctl.commands import Commands
from jobctl.exits import Exit, UsageError
from jobctl.output import show

# --by's words, as the command line spells them.
_BY: dict[str, Grouping] = {"day": "day", "model": "model", "job-type": "job_type", "user": "user"}
DEFAULT_DAYS = 30


def register(commands: Commands) -> None:
    p = commands.add(
        "usage", usage, "provider calls, tokens and cost per day, model, job type or user"
    )
    p.add_argument(
        "--since",
        type=day,
        metavar="YYYY-MM-DD",
        help=f"the first UTC day counted (default: {DEFAULT_DAYS} days before --until)",
    )
    p.add_argument(
        "--until",
        type=day,
        metavar="YYYY-MM-DD",
        help="the day after the last one counted, exclusive (default: tomorrow: today counts)",
    )
    p.add_argument(
        "--by",
        type=groupings,
        default=["day", "model"],
        metavar="day,model,job-type,user",
        help="what rows are grouped by, comma-separated (default day,model; 'none': totals)",
    )
    p.add_argument("--all-users", action="store_true", help="every user's usage (the admin role)")


def day(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day: give YYYY-MM-DD") from None


def groupings(text: str) -> list[Grouping]:
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["none"]:
        return []
    unknown = [w for w in words if w not in _BY]
    if unknown or not words:
        raise argparse.ArgumentTypeError(
            f"{text!r}: group by any of {', '.join(_BY)} (comma-separated), or none"
        )
    return list(dict.fromkeys(_BY[w] for w in words))


def _range(since: date | None, until: date | None) -> tuple[date, date]:
    end = until or datetime.now(UTC).date() + timedelta(days=1)
    start = since or end - timedelta(days=DEFAULT_DAYS)
    if start >= end:
        raise UsageError(f"--since {start} must be before --until {end} (exclusive)")
    return start, end


async def usage(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    start, end = _range(args.since, args.until)
    group_by: Sequence[Grouping] = args.by
    found = await client.get_usage(
        start, end, group_by=group_by, user_id="" if args.all_users else None
    )
    show(args, out, found.message, render.usage_table(found), items=found.message.groups)
    if not args.all_users and not found.totals.calls:
        print(
            f"jobctl: no provider calls for user {client.user_id!r} from {start} to {end}; "
            "--all-users counts every user's (the admin role), --user <id> one user's",
            file=sys.stderr,
        )
    return Exit.OK
