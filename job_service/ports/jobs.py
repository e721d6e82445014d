"""What the jobs use cases (create, get, cancel, re-run) need from storage and NATS."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from job_service.domain.lifecycle import JobStatus
from job_service.domain.models import Job, NewJob, QuotaRefusal, Quotas, RetrySpec


class BatchStore(Protocol):
    async def create_many(
        self, news: Sequence[NewJob], quotas: Quotas, trace: dict[str, str] | None = None
    ) -> list[tuple[Job, bool] | QuotaRefusal]:
        """``JobStore.create`` for each job in one statement, quotas counted in order; an
        outcome per job. Idempotency keys are distinct within ``news``."""
        ...


class JobStore(Protocol):
    async def create(self, new: NewJob, quotas: Quotas) -> tuple[Job, bool] | QuotaRefusal:
        """The job stored with its snapshot, timeline event and dispatch row (True), the
        job an idempotency key already names (False), or a refusal with nothing stored. A
        due job's dispatch row goes to the outbox dispatcher with the commit (``Handoff``):
        only a delayed job's needs a wake-up."""
        ...

    async def get(self, job_id: str, user_id: str | None) -> Job | None:
        """The job with artifacts and timeline; ``user_id`` None reads any user's job."""
        ...

    async def rerun(self, job_id: str, spec: RetrySpec, reason: str = "retry") -> Job | None:
        """A new job from a finished job's snapshot, ``reason`` on its first timeline
        event; None when that is not possible."""
        ...

    async def cancel(
        self, job_id: str, user_id: str
    ) -> tuple[JobStatus, JobStatus, list[str]] | None:
        """(status before, status after, descendants now CANCEL_REQUESTED), or None."""
        ...

    async def cancel_descendants(self, job_id: str, user_id: str) -> list[tuple[str, JobStatus]]:
        """Each unfinished descendant of the user's job that changed, with its new status."""
        ...

    async def delete_expired_snapshots(self, limit: int) -> int: ...


class CancelNotifier(Protocol):
    """Tells the worker running a job to stop it now (the heartbeat is the backstop)."""

    async def notify_cancel(self, job_id: str) -> None: ...


class CredentialOwnership(Protocol):
    """What CreateJob asks about a credential id: is it this user's?"""

    async def owned(self, credential_id: str, user_id: str) -> bool: ...
