"""What jobctl asks on the terminal: a confirmation before a change, a secret without
echo. Questions go to stderr so that stdout stays the answer's."""

from __future__ import annotations

import getpass
import sys

from jobctl.exits import UsageError


def confirmed(question: str) -> bool:
    """Only ``y`` or ``yes`` is a yes. Without a terminal to ask on, a usage error: scripts
    say ``--yes``."""
    if not sys.stdin.isatty():
        raise UsageError(
            f"{question} Refusing without confirmation: stdin is not a terminal; "
            "add --yes to confirm."
        )
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


def secret(prompt: str) -> str:
    """A secret from stdin, never from the command line (argv is visible to every user of
    the machine in ``ps`` and lands in shell history). On a terminal it is typed without
    echo; otherwise stdin is read whole (``jobctl credentials put ... < key.txt``) and
    trailing whitespace dropped."""
    typed = sys.stdin.isatty()
    value = (getpass.getpass(prompt, stream=sys.stderr) if typed else sys.stdin.read()).strip()
    if not value:
        raise UsageError("no key given: type it when asked, or pipe it on stdin")
    return value
