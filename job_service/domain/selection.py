"""Which jobs a listing shows or a bulk admin action acts on, and where a keyset page
continues. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from job_service.domain.lifecycle import JobStatus


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a listing shows; every field optional (None matches all)."""

    user_id: str | None = None
    job_type: str | None = None
    status: JobStatus | None = None
    queue: str | None = None
    created_after: datetime | None = None  # inclusive
    created_before: datetime | None = None  # exclusive
    # what the jobs are about: a type, or a type and an id
    target_type: str | None = None
    target_id: str | None = None
    # jobs whose id's hex digits end with these (lower case, no dashes)
    id_suffix: str | None = None
    # False: only jobs no retry was made from (RetryJob); None: either
    retried: bool | None = None


@dataclass(frozen=True)
class JobSelection:
    """Which jobs a bulk admin action (CancelJobs, RetryJobs) acts on: the jobs ``job_ids``
    names, or else the jobs ``where`` matches (never both; never neither). A filter's
    walk over several calls is pinned to the jobs that existed at its first call: those
    created before ``until`` (its first call's time; None: no bound), so that a job made
    during the walk (a retry it made, say) never joins it."""

    where: JobFilter = field(default_factory=JobFilter)
    job_ids: tuple[str, ...] = ()
    until: datetime | None = None


@dataclass(frozen=True)
class Actionable:
    """The jobs a bulk action would change: in one of ``statuses``, of a type not in
    ``excluded_types`` (for CancelJobs: the types that cannot be cancelled)."""

    statuses: frozenset[JobStatus]
    excluded_types: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Candidate:
    """A job a bulk action's page holds; ``actionable`` when the action would change it
    (CancelJob would cancel it, RetryJob would accept it)."""

    id: str
    created_at: datetime
    job_type: str
    status: JobStatus
    actionable: bool


@dataclass(frozen=True)
class Cursor:
    """Where a keyset page continues: strictly after this (created_at, id) in its order
    (newest first for listings, oldest first for bulk actions)."""

    created_at: datetime
    id: str
