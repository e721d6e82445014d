"""``jobctl signal JOB_ID NAME [--payload JSON]``: a named message to a job that has not
finished (JobService.SendSignal). Idempotent with ``--idempotency-key``; without one the
client makes one for the call, so its own retries never store the signal twice."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient

from jobctl.commands import Commands, all_users
from jobctl.exits import Exit, UsageError
from jobctl.lookup import locate, noted
from jobctl.output import show


def register(commands: Commands) -> None:
    p = commands.add("signal", signal, "send a signal (a named message) to a running job")
    p.add_argument("job_id", metavar="JOB_ID", help="the whole id or its last 8 characters")
    p.add_argument("name", help='what the job waits for, e.g. "approve"')
    p.add_argument("--payload", help="what the job's code receives, a JSON object")
    p.add_argument("--idempotency-key", help="resend safely: the same key stores one signal")
    all_users(p, "look the id up among every user's jobs (also done when you have none)")


def _payload(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--payload is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise UsageError("--payload must be a JSON object")
    return value


async def signal(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    payload = _payload(args.payload)
    located = await locate(client, args.job_id, all_users=args.all_users)
    noted(located, args.all_users)
    response = await client.signal(
        located.job.id,
        args.name,
        payload,
        idempotency_key=args.idempotency_key,
        user_id=located.owner or None,
    )
    verb = "sent" if response.created else "already sent"
    human = f"{verb} {response.signal.name} #{response.signal.seq} to {located.job.id}"
    show(args, out, response, human)
    return Exit.OK
