"""Fakes of ``ports.jobs``: the notice that stops a running job; and a stored job as the
stores answer it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from job_service.domain.jobs import Job
from job_service.domain.lifecycle import JobStatus

CREATED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def job(job_id: str = "j1", status: JobStatus = JobStatus.QUEUED, **fields: Any) -> Job:
    """A stored job with plain values; ``fields`` set any other column."""
    values: dict[str, Any] = {
        "user_id": "u", "job_type": "synthetic", "queue": "q", "priority": 0,
        "attempt_count": 0, "max_attempts": 3, "idempotency_key": None, "request_hash": "h",
        "progress": 0.0, "validated_output": None, "output_hash": None, "error_code": None,
        "public_error_message": None, "internal_error_message": None,
        "created_at": CREATED_AT, "updated_at": CREATED_AT, "started_at": None,
        "finished_at": None, "next_run_at": None,
    }  # fmt: skip
    return Job(id=job_id, status=status, **(values | fields))


class FakeCancelNotifier:
    """``CancelNotifier``: records each job told to stop; a notice for a job in
    ``failing`` raises, as NATS does when it is down (callers treat notices as best
    effort)."""

    def __init__(self, failing: Iterable[str] = ()) -> None:
        self.failing = set(failing)
        self.sent: list[str] = []

    async def notify_cancel(self, job_id: str) -> None:
        if job_id in self.failing:
            raise ConnectionError("NATS is down")
        self.sent.append(job_id)
