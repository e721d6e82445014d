"""jobctl's command line: the options every command takes, and the commands of each group
(``jobctl.commands.*``). argparse, completed by shtab (``jobctl completion bash|zsh``);
why not Click or Typer: docs/adr/0004-jobctl-cli.md."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import timedelta

import shtab

from jobctl import timespec
from jobctl.commands import (
    Commands,
    bulk,
    credentials,
    dead_letters,
    erasure,
    jobs,
    listing,
    queues,
    schedules,
    signals,
    usage,
    watching,
)
from jobctl.exits import describe
from jobctl.output import FORMATS

# A call's deadline unless --timeout says otherwise.
DEFAULT_TIMEOUT_S = 30.0


def timeout(text: str) -> float:
    """``--timeout``: seconds, or a number with a unit (``500ms``, ``2m``); above zero."""
    seconds = timespec.delay(text) / timedelta(seconds=1)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a timeout must be above zero")
    return seconds


def _common() -> argparse.ArgumentParser:
    """Options accepted before or after the command (defaults filled in by ``parse``)."""
    common = argparse.ArgumentParser(add_help=False)
    s = argparse.SUPPRESS
    common.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default=s,
        help="table (default) for people; json: the answer as one object; jsonl: one "
        "object per line, per item of a listing",
    )
    common.add_argument(
        "--json", dest="output", action="store_const", const="json", default=s, help="-o json"
    )
    common.add_argument(
        "--timeout",
        type=timeout,
        default=s,
        metavar="DURATION",
        help=f"each call's deadline: seconds, or e.g. 500ms, 2m (default {DEFAULT_TIMEOUT_S:g})",
    )
    common.add_argument(
        "--target", default=s, help="job_service host:port (JOBS_JOB_SERVICE_TARGET)"
    )
    common.add_argument("--token", default=s, help="bearer token (JOBS_AUTH_TOKEN)")
    common.add_argument(
        "--token-file",
        default=s,
        metavar="PATH",
        help="read the bearer token from this file, kept out of ps (JOBS_AUTH_TOKEN_FILE)",
    )
    common.add_argument("--tls-ca", default=s, help="CA bundle: use TLS (JOBS_TLS_CA_FILE)")
    common.add_argument(
        "--tls-cert", default=s, help="client certificate (JOBS_TLS_CLIENT_CERT_FILE)"
    )
    common.add_argument("--tls-key", default=s, help="client key (JOBS_TLS_CLIENT_KEY_FILE)")
    common.add_argument(
        "--user",
        default=s,
        help="act for this user (JOBS_USER_ID; default: your login name); an admin token may "
        "name any user",
    )
    common.add_argument(
        "-y",
        "--yes",
        action="store_true",
        default=s,
        help="do not ask for confirmation (accepted by every command)",
    )
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
    commands = Commands(sub, common)
    groups = (jobs, listing, watching, queues, bulk, dead_letters, credentials, schedules)
    for group in (*groups, signals, usage, erasure):
        group.register(commands)
    p = commands.add("completion", None, "print the shell completion script (bash or zsh)")
    p.add_argument("shell", choices=["bash", "zsh"])
    commands.add("dev", None, "run the embedded stack (what `make run` runs)")
    return parser


def completion(shell: str) -> str:
    """The completion script: ``source <(jobctl completion bash)``, or for zsh put the
    output in a file named ``_jobctl`` on ``$fpath``."""
    return str(shtab.complete(build_parser(), shell=shell))


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    defaults: dict[str, object] = {
        "target": None,
        "token": None,
        "token_file": None,
        "tls_ca": None,
        "tls_cert": None,
        "tls_key": None,
        "user": None,
        "yes": False,
        "output": "table",
        "timeout": DEFAULT_TIMEOUT_S,
    }
    for name, value in defaults.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return args
