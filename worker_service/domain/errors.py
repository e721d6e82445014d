"""How the worker's ports fail: internal control flow of the worker (drawn with the rest
in the ``shared.errors`` docstring), never seen outside it.

Adapters raise these (or a ``shared.errors.JobsError`` when the job service refused a call
on purpose), so that the pipeline decides what to retry without knowing gRPC or NATS::

    ExecutorUnreachable    the call may not have reached the job service: safe to retry
    ExecutorCallFailed     the job service failed the call without saying why: a bug
    DispatchUnavailable    the dispatch stream cannot be read right now: try again shortly
"""

from __future__ import annotations

from shared.errors import JobNotFound, LeaseLost, PlatformUnavailable


class ExecutorUnreachable(Exception):
    """A transport failure (unavailable, deadline exceeded): retrying is safe."""


class ExecutorCallFailed(Exception):
    """The job service failed a call without an ErrorInfo reason; not retried blindly."""


class DispatchUnavailable(Exception):
    """Fetching dispatch messages failed (e.g. NATS is reconnecting)."""


def is_transient(exc: BaseException) -> bool:
    """True when the same call may succeed if simply tried again."""
    return isinstance(exc, ExecutorUnreachable | PlatformUnavailable)


def means_lease_lost(exc: BaseException) -> bool:
    """True when the attempt no longer belongs to this worker: stop and report nothing."""
    return isinstance(exc, LeaseLost | JobNotFound)
