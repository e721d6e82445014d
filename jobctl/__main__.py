"""``jobctl``: the job engine from a terminal or a script.

    jobctl create synthetic -i '{"sleep_ms": 500}' --watch
    jobctl get <job id>          jobctl cancel <job id>       jobctl watch <job id>
    jobctl get 1a2b3c4d          (a short id: the last 8 characters, as list and tree show)
    jobctl list                  jobctl list --all-users --status failed -o jsonl
    jobctl retry <job id>        jobctl definitions           jobctl dev
    jobctl create synthetic --depends-on <job id> --depends-on <job id> --dependency-policy run
    jobctl tree <job id>         jobctl tree <job id> --all-users --depth 3 -o json
    jobctl create synthetic --delay 5m        jobctl create synthetic --run-at 2030-01-31T09:00:00Z
    jobctl queues                jobctl pause <queue>         jobctl resume <queue>
    jobctl workers
    jobctl rate-limits           jobctl dead-letters list     jobctl dead-letters redrive --all
    jobctl cancel-many --type synthetic --status queued [--dry-run] [--yes]
    jobctl retry-many --status failed --created-after 2030-01-31T00:00:00Z
    jobctl credentials put --provider openai < key.txt        jobctl credentials list
    jobctl watch <job id> --partial                           jobctl signal <job id> approve
    jobctl schedule create --cron "0 2 * * *" --type synthetic   jobctl schedule list
    jobctl usage --since 2030-01-01 --by day,model,job-type
    jobctl completion bash

Tables for people; ``-o json`` / ``-o jsonl`` for scripts; ``--timeout`` for each call's
deadline. Connection options default to the JOBS_* variables (``jobctl.connection``); the
calls go through the client library (``durable_jobs_client``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import grpc
from durable_jobs_client import ConfigError, JobsError
from pydantic import SecretStr, ValidationError

from jobctl.cli import completion, parse
from jobctl.connection import ClientSettings, open_client
from jobctl.exits import Exit, UsageError, for_status
from shared.settings_errors import describe as describe_settings


def client_settings(args: argparse.Namespace) -> ClientSettings:
    """The JOBS_* environment, with what the options say on top (a token option replaces
    both token variables)."""
    if args.token and args.token_file:
        raise UsageError("give --token or --token-file, not both")
    overrides: dict[str, object] = {
        "job_service_target": args.target,
        "tls_ca_file": Path(args.tls_ca) if args.tls_ca else None,
        "tls_client_cert_file": Path(args.tls_cert) if args.tls_cert else None,
        "tls_client_key_file": Path(args.tls_key) if args.tls_key else None,
        "user_id": args.user,
    }
    chosen = {k: v for k, v in overrides.items() if v is not None}
    if args.token:
        chosen.update(auth_token=SecretStr(args.token), auth_token_file=None)
    elif args.token_file:
        chosen.update(auth_token=None, auth_token_file=Path(args.token_file))
    return ClientSettings(**chosen)  # type: ignore[arg-type]


async def run(args: argparse.Namespace, out: TextIO) -> Exit:
    async with open_client(client_settings(args), args.timeout) as client:
        return await args.run(args, client, out)  # type: ignore[no-any-return]


def report(error: JobsError) -> Exit:
    """One line on stderr (and the fields at fault), and the exit status for the code."""
    code = error.code or grpc.StatusCode.UNKNOWN
    reason = f" ({error.reason})" if error.reason != code.name else ""
    print(f"jobctl: {code.name}: {error.message}{reason}", file=sys.stderr)
    for violation in error.violations:
        print(f"  {violation.field}: {violation.description}", file=sys.stderr)
    return for_status(code)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`jobctl list -o jsonl | head -1`): not an error of ours.
        # Point stdout at /dev/null so that the interpreter's final flush does not fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK


def _main(argv: Sequence[str] | None) -> int:
    args = parse(argv)
    if args.command == "dev":
        # The embedded stack is dev tooling, not part of the client: become `python -m
        # devstack` (same process, same signals), exactly what `make run` runs.
        os.execv(sys.executable, [sys.executable, "-m", "devstack"])
    if args.command == "completion":
        print(completion(args.shell))
        return Exit.OK
    try:
        return int(asyncio.run(run(args, sys.stdout)))
    except ValidationError as error:
        print(f"jobctl: invalid configuration:\n{describe_settings(error)}", file=sys.stderr)
        return Exit.USAGE
    except UsageError as error:
        print(f"jobctl: {error}", file=sys.stderr)
        return Exit.USAGE
    except (OSError, ConfigError) as error:  # an unreadable TLS or input file
        print(f"jobctl: {error}", file=sys.stderr)
        return Exit.USAGE
    except JobsError as error:
        return report(error)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
