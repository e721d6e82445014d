"""``jobctl``: the job engine from a terminal or a script.

    jobctl create synthetic -i '{"sleep_ms": 500}' --watch
    jobctl get <job id>          jobctl cancel <job id>       jobctl watch <job id>
    jobctl list                  jobctl list --admin --status failed
    jobctl retry <job id>        jobctl definitions           jobctl dev
    jobctl create synthetic --delay 5m        jobctl create synthetic --run-at 2030-01-31T09:00:00Z
    jobctl queues                jobctl pause <queue>         jobctl resume <queue>
    jobctl rate-limits

Tables for people; ``--json`` for scripts. Connection options default to the JOBS_*
variables the services use (see ``jobctl.connection``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TextIO

import grpc
from pydantic import SecretStr, ValidationError

from jobctl import commands, timespec
from jobctl.connection import ClientSettings, open_channel
from jobctl.exits import Exit, describe, for_status
from shared.grpc_client import ClientConfigError
from shared.rpc_errors import error_from_rpc
from shared.settings_errors import describe as describe_settings

Command = Callable[[argparse.Namespace, commands.Stubs, TextIO], Awaitable[Exit]]

STATUSES = [
    "created",
    "queued",
    "running",
    "retrying",
    "cancel_requested",
    "succeeded",
    "failed",
    "cancelled",
]


def _common() -> argparse.ArgumentParser:
    """Options accepted before or after the command (defaults filled in by ``parse``)."""
    common = argparse.ArgumentParser(add_help=False)
    s = argparse.SUPPRESS
    common.add_argument("--json", action="store_true", default=s, help="JSON output for scripts")
    common.add_argument(
        "--target", default=s, help="job_service host:port (JOBS_JOB_SERVICE_TARGET)"
    )
    common.add_argument("--token", default=s, help="bearer token (JOBS_AUTH_TOKEN)")
    common.add_argument("--tls-ca", default=s, help="CA bundle: use TLS (JOBS_TLS_CA_FILE)")
    common.add_argument(
        "--tls-cert", default=s, help="client certificate (JOBS_TLS_CLIENT_CERT_FILE)"
    )
    common.add_argument("--tls-key", default=s, help="client key (JOBS_TLS_CLIENT_KEY_FILE)")
    common.add_argument("--user", default=s, help="user id for JobService calls (JOBS_USER_ID)")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="jobctl",
        parents=[common],
        description="A command-line client for the durable job engine.",
        epilog=f"exit statuses:\n{describe()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Command | None, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(run=run)
        return p

    p = command("create", commands.create, "create a job")
    p.add_argument("job_type")
    p.add_argument("-i", "--input", help="the input, a JSON object")
    p.add_argument("--input-file", help="read the input from a file (- for stdin)")
    p.add_argument("--key", help="idempotency key")
    p.add_argument(
        "--priority",
        type=int,
        help="-1000..1000, higher runs first (default: the job type's); one level is worth "
        "JOBS_SCHED_PRIORITY_STEP_S seconds of waiting",
    )
    p.add_argument("--credential", help="run on your own stored provider key (its id)")
    p.add_argument("--watch", action="store_true", help="then watch it until it ends")
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

    p = command("get", commands.get, "show a job with its output and timeline")
    p.add_argument("job_id")
    p.add_argument("--admin", action="store_true", help="any user's job (AdminService)")

    command("cancel", commands.cancel, "cancel a job").add_argument("job_id")

    p = command("list", commands.list_jobs, "list jobs, newest first")
    p.add_argument("--limit", type=int, default=20, help="page size")
    p.add_argument("--page-token")
    p.add_argument("--admin", action="store_true", help="every user's jobs (AdminService)")
    p.add_argument("--type", help="with --admin: job type")
    p.add_argument("--status", choices=STATUSES, help="with --admin")
    p.add_argument("--queue", help="with --admin")
    p.add_argument("--user-filter", help="with --admin: one user's jobs")

    p = command("watch", commands.watch, "follow a job until it ends (exit 0/4/5)")
    p.add_argument("job_id")

    p = command("retry", commands.retry, "run a failed or cancelled job again, as a new job")
    p.add_argument("job_id")
    p.add_argument("--watch", action="store_true")

    command("definitions", commands.definitions, "list the job types")

    command("queues", commands.queues, "the queues: paused, waiting, eligible, running, limit")
    p = command(
        "pause", commands.pause, "stop granting a queue's jobs (running ones finish; admin)"
    )
    p.add_argument("queue")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p = command("resume", commands.resume, "grant a paused queue's jobs again (admin)")
    p.add_argument("queue")
    command(
        "rate-limits",
        commands.rate_limits,
        "the fleet-wide provider rate limits per model tier and their 429 back-off (admin)",
    )
    command("dev", None, "run the embedded stack (what `make run` runs)")
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    for name in ("target", "token", "tls_ca", "tls_cert", "tls_key", "user"):
        if not hasattr(args, name):
            setattr(args, name, None)
    if not hasattr(args, "json"):
        args.json = False
    return args


def client_settings(args: argparse.Namespace) -> ClientSettings:
    """The JOBS_* environment, with what the options say on top."""
    overrides: dict[str, object] = {
        "job_service_target": args.target,
        "auth_token": SecretStr(args.token) if args.token else None,
        "tls_ca_file": Path(args.tls_ca) if args.tls_ca else None,
        "tls_client_cert_file": Path(args.tls_cert) if args.tls_cert else None,
        "tls_client_key_file": Path(args.tls_key) if args.tls_key else None,
        "user_id": args.user,
    }
    return ClientSettings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


async def run(args: argparse.Namespace, out: TextIO) -> Exit:
    settings = client_settings(args)
    async with open_channel(settings) as channel:
        command: Command = args.run
        return await command(args, commands.Stubs(channel, settings.user_id), out)


def report(error: grpc.aio.AioRpcError) -> Exit:
    """One line on stderr (and the fields at fault), and the exit status for the code."""
    code = error.code()
    try:
        known = error_from_rpc(error)
    except ValueError:
        known = None
    reason = f" ({known.reason})" if known is not None else ""
    print(f"jobctl: {code.name}: {error.details()}{reason}", file=sys.stderr)
    for violation in known.violations if known is not None else []:
        print(f"  {violation.field}: {violation.description}", file=sys.stderr)
    return for_status(code)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.command == "dev":
        # The embedded stack is dev tooling, not part of the client: become `python -m
        # devstack` (same process, same signals), exactly what `make run` runs.
        os.execv(sys.executable, [sys.executable, "-m", "devstack"])
    try:
        return int(asyncio.run(run(args, sys.stdout)))
    except ValidationError as error:
        print(f"jobctl: invalid configuration:\n{describe_settings(error)}", file=sys.stderr)
        return Exit.USAGE
    except commands.UsageError as error:
        print(f"jobctl: {error}", file=sys.stderr)
        return Exit.USAGE
    except (OSError, ClientConfigError) as error:  # an unreadable TLS or input file
        print(f"jobctl: {error}", file=sys.stderr)
        return Exit.USAGE
    except grpc.aio.AioRpcError as error:
        return report(error)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
