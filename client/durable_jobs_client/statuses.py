"""Job statuses and holds by name, and which statuses end a job: the one place every
caller reads them from (the clients' ``watch`` and ``wait``, jobctl, the web console).

Names come from the generated enums (``JobStatus`` and ``JobHold.Reason`` of
proto/jobs/v1/job.proto), so a status added there is named here without an edit; which
statuses are terminal, and which RetryJob accepts, are the two facts written here::

    status_name(JobStatus.JOB_STATUS_CANCEL_REQUESTED) == "cancel_requested"
    status_value("failed") == JobStatus.JOB_STATUS_FAILED
"""

from __future__ import annotations

from typing import cast

from durable_jobs_client._pb.jobs.v1 import job_pb2

JobStatus = job_pb2.JobStatus
_STATUS_PREFIX = "JOB_STATUS_"
_HOLD_PREFIX = "REASON_"

# A job in one of these has ended: no other status follows (a WatchJob stream ends here).
TERMINAL: frozenset[job_pb2.JobStatus] = frozenset(
    {job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED}
)
# What AdminService.RetryJob accepts: a job that ended without succeeding.
RETRYABLE: frozenset[job_pb2.JobStatus] = frozenset(
    {job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED}
)


def status_name(status: int) -> str:
    """``JOB_STATUS_CANCEL_REQUESTED`` -> ``cancel_requested``; a number this client does
    not know (a newer service) as the number."""
    try:
        return str(JobStatus.Name(status)).removeprefix(_STATUS_PREFIX).lower()
    except ValueError:
        return str(status)


def status_value(name: str) -> job_pb2.JobStatus:
    """The inverse of ``status_name``: ``failed`` -> ``JOB_STATUS_FAILED``; "" or a name no
    status has -> ``JOB_STATUS_UNSPECIFIED`` (0: no status, e.g. no filter)."""
    try:
        return cast(job_pb2.JobStatus, JobStatus.Value(_STATUS_PREFIX + name.upper()))
    except ValueError:
        return job_pb2.JOB_STATUS_UNSPECIFIED


# Every status by name, in the enum's order (the lifecycle's), without UNSPECIFIED.
STATUS_NAMES: tuple[str, ...] = tuple(status_name(v) for v in JobStatus.values() if v)


def is_terminal(job: job_pb2.Job) -> bool:
    """The job has ended: succeeded, failed or cancelled."""
    return job.status in TERMINAL


def hold_name(reason: int) -> str:
    """``REASON_QUEUE_PAUSED`` -> ``queue_paused``; an unknown number as the number."""
    try:
        return str(job_pb2.JobHold.Reason.Name(reason)).removeprefix(_HOLD_PREFIX).lower()
    except ValueError:
        return str(reason)


def has_hold(job: job_pb2.Job) -> bool:
    """The job says why it waits (a waiting job, as AdminService.GetJob answers it)."""
    return job.HasField("hold") and job.hold.reason != job_pb2.JobHold.REASON_UNSPECIFIED
