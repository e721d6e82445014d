"""jobctl's commands, one module per group: ``jobs`` (create, get, cancel, list, watch,
retry, tree), ``queues`` (queues, pause, resume, rate limits, definitions), ``bulk``
(cancel-many, retry-many), ``dead_letters``, ``credentials``, ``schedules`` (schedule
create, get, list, update, pause, resume, delete, trigger), ``signals`` (signal),
``usage``, ``erasure`` (erase-user). Each module's
``register(commands)`` adds its commands; each command takes its parsed arguments, the
client and stdout, prints, and returns an exit status (``jobctl.exits``). A failed call
raises the client's ``JobsError``, which ``jobctl.__main__`` maps to the exit status.

A new group is a new module here and one line in ``jobctl.cli``.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient

from jobctl.exits import Exit

Command = Callable[[argparse.Namespace, AsyncJobsClient, TextIO], Awaitable[Exit]]


class Commands:
    """Where a group adds its commands: each gets the options every command takes."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser) -> None:
        self._sub = sub
        self._common = common

    def add(self, name: str, run: Command | None, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._sub.add_parser(
            name, parents=[self._common], help=help, description=help
        )
        parser.set_defaults(run=run)
        return parser

    def group(self, name: str, help: str) -> Commands:
        """A command with subcommands of its own (``jobctl credentials put``)."""
        parser: argparse.ArgumentParser = self._sub.add_parser(
            name, parents=[self._common], help=help, description=help
        )
        sub = parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")
        return Commands(sub, self._common)


def all_users(parser: argparse.ArgumentParser, help: str) -> None:
    """``--all-users``: the one name for "every user's, as an admin" (AdminService).
    ``--admin``, its name before, still works (hidden), so that scripts keep working."""
    parser.add_argument("--all-users", action="store_true", help=help)
    parser.add_argument("--admin", dest="all_users", action="store_true", help=argparse.SUPPRESS)
