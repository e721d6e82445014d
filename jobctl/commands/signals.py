"""``jobctl signal JOB_ID NAME [--payload JSON]``: a named message to a job that has not
finished (JobService.SendSignal). Idempotent with ``--idempotency-key``; without one the
client makes one for the call, so its own retries never store the signal twice."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient

from jobctl.commands import Commands
from jobctl.exits import Exit, UsageError
from jobctl.output import show


def register(commands: Commands) -> None:
    p = commands.add("signal", signal, "send a signal (a named message) to a running job")
    p.add_argument("job_id")
    p.add_argument("name", help='what the job waits for, e.g. "approve"')
    p.add_argument("--payload", help="what the job's code receives, a JSON object")
    p.add_argument("--idempotency-key", help="resend safely: the same key stores one signal")


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
    response = await client.signal(
        args.job_id, args.name, _payload(args.payload), idempotency_key=args.idempotency_key
    )
    verb = "sent" if response.created else "already sent"
    human = f"{verb} {response.signal.name} #{response.signal.seq} to {args.job_id}"
    show(args, out, response, human)
    return Exit.OK
