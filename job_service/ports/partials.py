"""What WatchJob needs to relay partial output: the pieces of a running job's model text."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

# Receives one piece as published by the worker (an encoded jobs.v1.PartialOutput, opaque
# here: the use case only passes it on). Synchronous: it must not block.
PieceSink = Callable[[bytes], None]


class PartialOutputFeed(Protocol):
    def subscribe(self, job_id: str, deliver: PieceSink) -> AbstractAsyncContextManager[None]:
        """Calls ``deliver`` with each piece published for ``job_id`` while the context is
        open; every piece published after entering is delivered (best effort: the
        transport keeps nothing)."""
        ...
