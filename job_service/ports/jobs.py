"""What the jobs use cases need from storage and NATS: new jobs (create, create many,
re-run) and a job's own path (get, cancel)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from job_service.domain.jobs import Job, NewJob, RetrySpec
from job_service.domain.lifecycle import JobStatus
from job_service.domain.outbox import OutboxMessage
from job_service.domain.quotas import QuotaRefusal, Quotas

# A stored new job: the job and whether this call created it (False: the job its
# idempotency key names), or the quota that kept it out.
Stored = tuple[Job, bool] | QuotaRefusal


class NewJobStore(Protocol):
    async def create(self, new: NewJob, quotas: Quotas) -> tuple[Stored, list[OutboxMessage]]:
        """The job stored with its snapshot, timeline event and dispatch row (True), the
        job an idempotency key already names (False), or a refusal with nothing stored;
        with the outbox rows it wrote already claimed for this replica's dispatcher (a due
        job's dispatch row), committed, to hand over (``Handoff``). A job with dependencies
        is attached to them in the same transaction. Raises ``DataKeyChanged`` (nothing
        stored) when ``new.sealed_under`` is not the key the user's key row holds."""
        ...

    async def owned(self, job_ids: list[str], user_id: str) -> set[str]:
        """Which of ``job_ids`` are jobs of ``user_id``."""
        ...


class BatchStore(Protocol):
    async def create_many(
        self, news: Sequence[NewJob], quotas: Quotas, trace: dict[str, str] | None = None
    ) -> tuple[list[Stored], list[OutboxMessage]]:
        """``NewJobStore.create`` for each job in one statement, quotas counted in order:
        an outcome per job, and the rows to hand over. Idempotency keys are distinct within
        ``news``."""
        ...


class RerunStore(Protocol):
    async def rerun_input(self, job_id: str) -> dict[str, Any] | None:
        """The input a re-run of the job would copy (its snapshot), or None when gone."""
        ...

    async def rerun(
        self,
        job_id: str,
        spec: RetrySpec,
        reason: str = "retry",
        *,
        key: str | None = None,
        since: datetime | None = None,
        new_id: str | None = None,
        snapshot: Any = None,
    ) -> tuple[Job, bool] | None:
        """A new job (``new_id``, else a fresh id) from a finished job's snapshot (or
        ``snapshot``, its copy sealed for the new job), ``reason`` on its first timeline
        event, and whether this call made it (False: the retry ``key`` names); None when
        that is not possible. At most one live retry per original job (LiveRetryExists),
        none made at or after ``since`` either."""
        ...


class JobStore(Protocol):
    async def get(self, job_id: str, user_id: str | None) -> Job | None:
        """The job with artifacts and timeline; ``user_id`` None reads any user's job."""
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
