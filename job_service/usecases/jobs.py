"""JobService's use cases on one job: read it, cancel it (and its unfinished descendants
with it), and forget its snapshot once it has expired. New jobs are ``usecases/new_jobs.py``'s."""

from __future__ import annotations

from dataclasses import replace

from job_service import metrics
from job_service.domain.checks import require_name, require_uuid
from job_service.domain.declared_types import JobTypes
from job_service.domain.jobs import Job
from job_service.domain.lifecycle import JobStatus
from job_service.ports.jobs import CancelNotifier, JobStore
from job_service.ports.outbox import Waker
from job_service.usecases.sealing import Sealer
from job_service.usecases.stop_notices import tell_workers_to_stop
from shared.errors import JobAlreadyCancelled, JobNotCancellable, JobNotFound

SNAPSHOT_CLEAN_BATCH = 500


def with_withheld_fields(registry: JobTypes, job: Job) -> Job:
    """The job naming the input fields its type never stores (none for a type this
    deployment no longer knows: its fields cannot be named)."""
    if not registry.knows(job.job_type):
        return job
    withheld = registry.get(job.job_type).withheld_fields()
    return replace(job, input_withheld_fields=withheld)


class Jobs:
    def __init__(
        self,
        registry: JobTypes,
        store: JobStore,
        notifier: CancelNotifier,
        outbox: Waker,
        *,
        sealer: Sealer | None = None,
    ) -> None:
        """``sealer`` opens the payloads a read shows (None: stored as they are)."""
        self._sealer = sealer or Sealer(None, None)
        self._registry = registry
        self._store = store
        self._notifier = notifier
        self._outbox = outbox

    async def get_job(self, job_id: str, user_id: str) -> Job:
        require_uuid("job_id", job_id)
        require_name("user_id", user_id)
        job = await self._store.get(job_id, user_id)
        if job is None:
            raise JobNotFound("no such job")
        return with_withheld_fields(self._registry, await self._sealer.opened(job))

    async def find_job(self, job_id: str, user_id: str) -> Job | None:
        """The job, or None when it is gone (ids already checked by get_job)."""
        job = await self._store.get(job_id, user_id)
        return None if job is None else await self._sealer.opened(job)

    async def cancel_job(self, job_id: str, user_id: str) -> Job:
        require_uuid("job_id", job_id)
        require_name("user_id", user_id)
        job = await self._store.get(job_id, user_id)
        if job is None:
            raise JobNotFound("no such job")
        if job.status.terminal or not self._registry.get(job.job_type).cancellable:
            return await self._cancel_children_of_uncancellable(job_id, user_id, job.status)
        changed = await self._store.cancel(job_id, user_id)
        assert changed is not None, "a job vanished between read and cancel"
        before, after, requested = changed
        if after is not before:
            metrics.job_cancelled(job.job_type, before, after)
        if after is before and before.terminal:
            # finished between our read and the locked re-read (its children may be new)
            return await self._cancel_children_of_uncancellable(job_id, user_id, before)
        if after is JobStatus.CANCEL_REQUESTED and before is JobStatus.RUNNING:
            requested = [job_id, *requested]
        await tell_workers_to_stop(self._notifier, requested)
        self._outbox.wake()
        return await self.get_job(job_id, user_id)

    async def _cancel_children_of_uncancellable(
        self, job_id: str, user_id: str, status: JobStatus
    ) -> Job:
        """A finished (or uncancellable) parent's unfinished descendants are cancelled with
        it and the parent is returned as it is; with none, the cancel is refused."""
        cascaded = await self._store.cancel_descendants(job_id, user_id)
        if cascaded:
            await tell_workers_to_stop(
                self._notifier, [j for j, after in cascaded if after is JobStatus.CANCEL_REQUESTED]
            )
            self._outbox.wake()
            return await self.get_job(job_id, user_id)
        if status is JobStatus.CANCELLED:
            raise JobAlreadyCancelled("the job is already cancelled")
        raise JobNotCancellable(f"a {status} job cannot be cancelled")

    async def delete_expired_snapshots(self) -> int:
        """The snapshot cleaner's round: finished jobs' snapshots past their expiry."""
        return await self._store.delete_expired_snapshots(SNAPSHOT_CLEAN_BATCH)
