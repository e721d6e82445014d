"""The output formats every command that reads or lists offers (``-o``):

- ``table`` (default): aligned tables and key/value blocks for people;
- ``json``: the answer as one JSON object (the API's message, proto field names);
- ``jsonl``: one JSON object per line, one per item of a listing (a job, a queue, ...),
  so that ``jq -c``, ``grep`` and ``while read`` work line by line.

``--json`` is kept as the short form of ``-o json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any, TextIO

from jobctl import render

FORMATS = ("table", "json", "jsonl")


def fmt(args: argparse.Namespace) -> str:
    return str(args.output)


def for_machines(args: argparse.Namespace) -> bool:
    return fmt(args) != "table"


def show(
    args: argparse.Namespace,
    out: TextIO,
    message: Any,
    human: str,
    items: Iterable[Any] | None = None,
) -> None:
    """``message`` (the whole answer) as JSON, ``items`` (its rows; default: the message
    itself) as JSON Lines, or ``human``."""
    match fmt(args):
        case "json":
            print(render.as_json(message), file=out)
        case "jsonl":
            for item in [message] if items is None else items:
                print(render.as_json(item), file=out)
        case _:
            print(human, file=out)
