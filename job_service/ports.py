"""The ports the use cases are written against; adapters implement them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from job_service.domain.credentials import (
    AttemptCredential,
    CredentialRecord,
    NewCredential,
    Sealed,
)
from job_service.domain.lifecycle import JobStatus
from job_service.domain.models import (
    AttemptFacts,
    Cursor,
    DeadEvent,
    FailureOutcome,
    HeartbeatAck,
    Job,
    JobFilter,
    LockGrant,
    LockRefusal,
    NewChild,
    NewJob,
    QuotaRefusal,
    Quotas,
    RetrySpec,
    Submission,
)
from job_service.domain.retry import RetryDecision
from shared.ai.provider import UsageRecord
from shared.errors import LeaseLost


class Decide(Protocol):
    def __call__(self, facts: AttemptFacts, code: str) -> RetryDecision: ...


class JobStore(Protocol):
    async def create(self, new: NewJob, quotas: Quotas) -> tuple[Job, bool] | QuotaRefusal: ...

    async def get(self, job_id: str, user_id: str | None) -> Job | None: ...

    async def retry(self, job_id: str, spec: RetrySpec) -> Job | None: ...

    async def cancel(
        self, job_id: str, user_id: str
    ) -> tuple[JobStatus, JobStatus, list[str]] | None: ...

    async def cancel_descendants(
        self, job_id: str, user_id: str
    ) -> list[tuple[str, JobStatus]]: ...

    async def job_types(self, job_ids: Sequence[str]) -> dict[str, str]: ...

    async def delete_expired_snapshots(self, limit: int) -> int: ...

    async def lock(
        self, job_ids: Sequence[str], worker_id: str
    ) -> list[LockGrant | LockRefusal]: ...

    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck: ...

    async def submit_results(
        self, results: Sequence[Submission], children: Sequence[NewChild] = ()
    ) -> list[JobStatus | LeaseLost]: ...

    async def end_attempt(
        self,
        job_id: str,
        lease_token: str,
        code: str,
        message: str,
        decide: Decide,
        usage: Sequence[UsageRecord] = (),
    ) -> FailureOutcome: ...

    async def reap_expired_leases(self, limit: int, decide: Decide) -> list[FailureOutcome]: ...

    async def redispatch_stranded(self, after_s: float, limit: int) -> int: ...


class JobListingStore(Protocol):
    """The read side: listings, the watch check, dead letters and their redrive."""

    async def list_jobs(self, where: JobFilter, after: Cursor | None, limit: int) -> list[Job]: ...

    async def fingerprints(self, job_ids: Sequence[str]) -> dict[str, Any]: ...

    async def dead_events(self, before_id: int | None, limit: int) -> list[DeadEvent]: ...

    async def redrive(self, event_ids: Sequence[int] | None) -> int: ...


class CancelNotifier(Protocol):
    async def notify_cancel(self, job_id: str) -> None: ...


class Waker(Protocol):
    """Tells the outbox dispatcher that rows are (or will be, after ``after_s``) due."""

    def wake(self, after_s: float = 0.0) -> None: ...


class CredentialStore(Protocol):
    """Users' sealed provider keys; never the plaintext."""

    async def insert(self, new: NewCredential) -> CredentialRecord: ...

    async def for_user(self, user_id: str) -> list[CredentialRecord]: ...

    async def delete(self, credential_id: str, user_id: str) -> bool: ...

    async def owned(self, credential_id: str, user_id: str) -> bool: ...

    async def for_attempt(
        self, job_id: str, lease_token: str, statuses: Sequence[str]
    ) -> AttemptCredential | None:
        """The job's credential if ``lease_token`` is its current, unexpired lease and its
        status is one of ``statuses``; None otherwise. Marks a user's key as used."""
        ...

    async def key_ids(self) -> set[str]: ...

    async def not_sealed_under(
        self, key_id: str, limit: int
    ) -> list[tuple[str, str, str, Sealed]]: ...

    async def reseal(self, credential_id: str, old_key_id: str, sealed: Sealed) -> bool: ...


class CredentialOwnership(Protocol):
    """What CreateJob asks about a credential id: is it this user's?"""

    async def owned(self, credential_id: str, user_id: str) -> bool: ...
