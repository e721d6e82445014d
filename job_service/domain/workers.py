"""A worker as operators see it: connected now, what it runs, how busy it is. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class LiveWorker:
    """A worker with an open session on some replica."""

    worker_id: str
    # when its oldest open session opened
    connected_at: datetime
    # "job_type@version", as its last LockJobs call said (empty before any)
    definitions: tuple[str, ...]
    # jobs it holds a lease on now
    running_jobs: int
