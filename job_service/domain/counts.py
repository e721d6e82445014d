"""Exact job counts over a time window, as operators read them (AdminService.CountJobs).
No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from job_service.domain.lifecycle import JobStatus
from shared.errors import FieldViolation, InvalidInput

# The longest window counted: the created-in-window count scans its rows.
LONGEST_WINDOW = timedelta(days=31)


@dataclass(frozen=True)
class JobCounts:
    """Jobs created in [since, until) by their status now, jobs that finished in it by
    their terminal status, and every unfinished job now by status (``delayed``: those of
    them created, due later)."""

    since: datetime
    until: datetime
    created: dict[JobStatus, int] = field(default_factory=dict)
    finished: dict[JobStatus, int] = field(default_factory=dict)
    unfinished: dict[JobStatus, int] = field(default_factory=dict)
    delayed: int = 0


def require_window(since: datetime | None, until: datetime | None) -> None:
    """InvalidInput unless ``since`` is set, before ``until`` (None: now, checked by the
    store) and the window is at most LONGEST_WINDOW long."""
    if since is None:
        raise InvalidInput("since is required", [FieldViolation("since", "the window's start")])
    if until is not None and not since < until:
        raise InvalidInput("the window is empty", [FieldViolation("until", "after since")])
    end = until or datetime.now(since.tzinfo)
    if end - since > LONGEST_WINDOW:
        raise InvalidInput(
            "the window is too long", [FieldViolation("since", "at most 31 days before until")]
        )
