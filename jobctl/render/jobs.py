"""Jobs in lists and live lines: the table of a listing (short ids), the lines of
``watch``, the failed jobs of the dead letters. One job's detail is ``render.detail``.
Status names and the terminal set are the client library's
(``durable_jobs_client.statuses``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import status_name

from jobctl.ids import short_id
from jobctl.render.detail import error_text
from jobctl.render.detail import job_detail as job_detail  # its home before render.detail
from jobctl.render.text import iso, relative, table, when

BAR_WIDTH = 24


def jobs_table(jobs: Sequence[job_pb2.Job], *, users: bool = False, whole_ids: bool = False) -> str:
    """A row per job, its id short unless ``whole_ids``; ``users``: a USER column, for a
    listing of every user's jobs."""
    if not jobs:
        return "no jobs"
    head = ["ID", *(["USER"] if users else []), "TYPE", "STATUS", "QUEUE", "ATTEMPTS", "CREATED"]
    return table(
        head,
        [
            [
                j.id if whole_ids else short_id(j.id),
                *([j.user_id] if users else []),
                j.job_type,
                status_name(j.status),
                j.queue,
                f"{j.attempt_count}/{j.max_attempts}",
                when(j.created_at),
            ]
            for j in jobs
        ],
    )


def progress_line(job: job_pb2.Job) -> str:
    """``[########----------------]  35%  running  attempt 1/4``"""
    done = round(max(0.0, min(1.0, job.progress)) * BAR_WIDTH)
    bar = "#" * done + "-" * (BAR_WIDTH - done)
    return (
        f"[{bar}] {job.progress:4.0%}  {status_name(job.status)}"
        f"  attempt {job.attempt_count}/{job.max_attempts}"
    )


def status_change(job: job_pb2.Job, now: datetime | None = None) -> str:
    """``12:28:31.123Z  running  attempt 2  on w-1  error (attempt 1 of 4) ...``: when
    jobctl saw the change (UTC, to the millisecond), and the error labelled with the
    attempt it ended."""
    at = iso(now or datetime.now(UTC), ms=True).partition("T")[2]
    parts = [at, status_name(job.status), f"attempt {job.attempt_count}"]
    if job.worker_id and job.status == job_pb2.JOB_STATUS_RUNNING:
        parts.append(f"on {job.worker_id}")
    if job.error_code:
        # the line names the current attempt already
        parts.append(f"error {error_text(job, say_current=False)}")
    if job.status == job_pb2.JOB_STATUS_RETRYING and job.HasField("next_run_at"):
        parts.append(f"next retry {relative(job.next_run_at, now or datetime.now(UTC))}")
    return "  ".join(parts)


def failed_jobs_table(jobs: Sequence[job_pb2.Job]) -> str:
    if not jobs:
        return "none"
    return table(
        ["ID", "TYPE", "USER", "ATTEMPTS", "FINISHED", "ERROR"],
        [
            [
                short_id(j.id),
                j.job_type,
                j.user_id,
                f"{j.attempt_count}/{j.max_attempts}",
                when(j.finished_at),
                j.error_code or "-",
            ]
            for j in jobs
        ],
    )
