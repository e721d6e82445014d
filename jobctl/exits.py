"""jobctl's exit statuses: what scripts may rely on (also listed by ``jobctl --help``)."""

from __future__ import annotations

from enum import IntEnum

import grpc


class Exit(IntEnum):
    OK = 0  # done; for watch (and create --watch): the job succeeded
    ERROR = 1  # anything else: an internal error of the service, a bug
    USAGE = 2  # bad arguments or options, or input that is not JSON
    NOT_FOUND = 3  # no such job (for this user)
    JOB_FAILED = 4  # watch: the job ended failed
    JOB_CANCELLED = 5  # watch: the job ended cancelled
    REFUSED = 6  # the service refused the request: invalid input, not cancellable, ...
    UNAVAILABLE = 7  # the service could not be reached, or did not answer in time
    DENIED = 8  # missing or rejected token, or a role the call needs
    NOT_CONFIRMED = 9  # a confirmation was declined: nothing was done


_BY_CODE = {
    grpc.StatusCode.NOT_FOUND: Exit.NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT: Exit.REFUSED,
    grpc.StatusCode.FAILED_PRECONDITION: Exit.REFUSED,
    grpc.StatusCode.ALREADY_EXISTS: Exit.REFUSED,
    grpc.StatusCode.OUT_OF_RANGE: Exit.REFUSED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Exit.REFUSED,
    grpc.StatusCode.UNAVAILABLE: Exit.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: Exit.UNAVAILABLE,
    grpc.StatusCode.UNAUTHENTICATED: Exit.DENIED,
    grpc.StatusCode.PERMISSION_DENIED: Exit.DENIED,
}


def for_status(code: grpc.StatusCode) -> Exit:
    return _BY_CODE.get(code, Exit.ERROR)


def describe() -> str:
    """The table for ``--help``."""
    meaning = {
        Exit.OK: "success (watch: the job succeeded)",
        Exit.ERROR: "unexpected error",
        Exit.USAGE: "usage error",
        Exit.NOT_FOUND: "no such job",
        Exit.JOB_FAILED: "watch: the job failed",
        Exit.JOB_CANCELLED: "watch: the job was cancelled",
        Exit.REFUSED: "refused (invalid input, not cancellable, ...)",
        Exit.UNAVAILABLE: "job_service unreachable or too slow",
        Exit.DENIED: "unauthenticated or not allowed",
        Exit.NOT_CONFIRMED: "not confirmed: nothing was done",
    }
    return "\n".join(f"  {int(code)}  {text}" for code, text in meaning.items())


class UsageError(Exception):
    """Arguments that parse but make no sense (e.g. input that is not a JSON object):
    exit 2, nothing sent."""
