"""The job lifecycle: its states, the only transitions allowed between them, and the
named sets of statuses every other module (SQL included) takes from here.

Pure: no I/O. The postgres adapters mirror each transition as a compare-and-set
``UPDATE … WHERE id = :id AND status = ANY(:from)``, taking its ``from`` sets from here.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    CREATED = "created"  # created to run later (run_at / delay): waits until due
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    CANCEL_REQUESTED = "cancel_requested"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})
# A new job starts waiting: queued, or created when it is to run later.
INITIAL = frozenset({JobStatus.CREATED, JobStatus.QUEUED})


class Step(StrEnum):
    """Why a job moves."""

    LOCK = "lock"  # a worker took the lease
    CANCEL = "cancel"  # CancelJob
    SUCCEED = "succeed"  # SubmitResult with the current lease
    RETRY = "retry"  # a retryable failure or an expired lease, attempts left
    FAIL = "fail"  # a final failure
    CONFIRM_CANCEL = "confirm_cancel"  # the worker stopped, or its lease ran out
    DEPENDENCY_FAILED = "dependency_failed"  # a dependency failed: the policy ends the job
    DEADLINE = "deadline"  # its deadline passed unfinished (the deadline keeper)


_S = JobStatus
TRANSITIONS: dict[tuple[JobStatus, Step], JobStatus] = {
    (_S.CREATED, Step.LOCK): _S.RUNNING,
    (_S.CREATED, Step.CANCEL): _S.CANCELLED,
    (_S.CREATED, Step.DEPENDENCY_FAILED): _S.FAILED,
    (_S.QUEUED, Step.LOCK): _S.RUNNING,
    (_S.RETRYING, Step.LOCK): _S.RUNNING,
    (_S.QUEUED, Step.CANCEL): _S.CANCELLED,
    (_S.RETRYING, Step.CANCEL): _S.CANCELLED,
    (_S.RUNNING, Step.SUCCEED): _S.SUCCEEDED,
    (_S.RUNNING, Step.RETRY): _S.RETRYING,
    (_S.RUNNING, Step.FAIL): _S.FAILED,
    (_S.RUNNING, Step.CANCEL): _S.CANCEL_REQUESTED,
    (_S.CANCEL_REQUESTED, Step.CONFIRM_CANCEL): _S.CANCELLED,
    # a running attempt is stopped with it (its lease revoked); a pending cancel is left
    # to end the job cancelled
    (_S.CREATED, Step.DEADLINE): _S.FAILED,
    (_S.QUEUED, Step.DEADLINE): _S.FAILED,
    (_S.RETRYING, Step.DEADLINE): _S.FAILED,
    (_S.RUNNING, Step.DEADLINE): _S.FAILED,
}


class IllegalTransition(Exception):
    def __init__(self, status: JobStatus, step: Step) -> None:
        super().__init__(f"cannot {step} a job that is {status}")
        self.status = status
        self.step = step


def transition(status: JobStatus, step: Step) -> JobStatus:
    """The status after ``step``, or IllegalTransition."""
    try:
        return TRANSITIONS[(status, step)]
    except KeyError:
        raise IllegalTransition(status, step) from None


def sources(step: Step) -> frozenset[JobStatus]:
    """The statuses ``step`` may start from: the ``status = ANY(:from)`` of its SQL."""
    return frozenset(status for status, s in TRANSITIONS if s is step)


def statuses_sql(statuses: frozenset[JobStatus]) -> str:
    """A status set as an SQL list literal, in declaration order: ``('queued', ...)``.
    A literal (not a bind parameter) lets the planner match partial indexes."""
    return "(" + ", ".join(f"'{s.value}'" for s in JobStatus if s in statuses) + ")"


def status_values(statuses: frozenset[JobStatus]) -> list[str]:
    """A status set as a sorted list of strings, for a ``status = ANY($n)`` parameter."""
    return sorted(s.value for s in statuses)


# The named status sets: one spelling each.
# created, queued, retrying: waiting; a worker may take the lease once due
LOCKABLE = sources(Step.LOCK)
# A worker holds the lease: its result or its stop can still be accepted.
LEASED = sources(Step.SUCCEED) | sources(Step.CONFIRM_CANCEL)  # running, cancel_requested
ACTIVE = frozenset(JobStatus) - TERMINAL  # unfinished (the per-user active quota)
# Counted as queue depth: unfinished and past creation (a delayed job is not yet work).
UNFINISHED = ACTIVE - {JobStatus.CREATED}
# An operator may re-run these as a new job (AdminService.RetryJob).
RERUNNABLE = frozenset({JobStatus.FAILED, JobStatus.CANCELLED})
