"""EraseUserData (issue 44): a user's data erased for good.

First the user's data key is destroyed: every payload of theirs sealed under it, in the
database, its replicas and its backups, stops opening (crypto-shredding). Then their
finished jobs go, in bounded batches, with every row of theirs (snapshots, artifacts,
steps, events, signals, dependency edges, outbox rows), the jobs' per-call usage rows
folded into the daily counters first; then their schedules and stored provider keys.

Kept, without content: ``usage_daily`` and ``usage_daily_job_types`` (calls, tokens and
cost per user, UTC day, provider, model, job type: billing) and ``job_quota_usage`` (jobs
created per user and day: the quota). Nothing else of the user's stays.

Unfinished jobs: an erase refuses (USER_HAS_RUNNING_JOBS, nothing changed) while any job
of the user has not ended, since a worker may still report for it. With ``cancel_running``
it cancels them first (as CancelJobs does, attributed to the caller) and refuses the same
way until every one has ended (a running job's worker stops it; a job of a type that
cannot be cancelled is waited for): the caller calls again. Idempotent: a second erase
finds nothing and answers zeros. A job the user creates after the erase gets a new data
key (``Sealer.sealed_job`` checks the key row, so no replica seals a new job under the
destroyed key it had cached).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from job_service.domain.checks import require_name
from job_service.domain.selection import JobFilter, JobSelection
from job_service.ports.erasure import ErasureStore, UserData
from job_service.usecases.bulk import MAX_LIMIT, BulkActions, BulkRequest
from job_service.usecases.sealing import Sealer
from shared.errors import UserHasRunningJobs

log = logging.getLogger(__name__)

# Jobs deleted per statement: a user with a million jobs is erased a batch at a time, never
# in one transaction holding every row.
ERASE_BATCH = 500
CANCEL_REASON = "erase user data"


@dataclass(frozen=True)
class Erased:
    """What an erase deleted (a dry run: would delete)."""

    data: UserData
    key_destroyed: bool  # a dry run: the user has a data key
    unfinished: int = 0  # a dry run: jobs not ended; an erase: created while it ran
    cancelled: int = 0


class UserErasure:
    def __init__(self, store: ErasureStore, sealer: Sealer, bulk: BulkActions) -> None:
        self._store = store
        self._sealer = sealer
        self._bulk = bulk

    async def erase(
        self, user_id: str, principal: str, *, dry_run: bool = False, cancel_running: bool = False
    ) -> Erased:
        require_name("user_id", user_id)
        if dry_run:
            return Erased(
                await self._store.count(user_id),
                await self._sealer.holds_key(user_id),
                unfinished=await self._store.unfinished(user_id),
            )
        cancelled = 0
        unfinished = await self._store.unfinished(user_id)
        if unfinished and cancel_running:
            cancelled = await self._cancel(user_id, principal)
            unfinished = await self._store.unfinished(user_id)
        if unfinished:
            raise UserHasRunningJobs(
                f"the user has {unfinished} unfinished job(s); nothing was erased: "
                + (
                    "call again once the cancelled jobs have ended"
                    if cancel_running
                    else "cancel them (cancel_running) and call again once they have ended"
                ),
                metadata={"unfinished": str(unfinished), "cancelled": str(cancelled)},
            )
        destroyed = await self._sealer.destroy(user_id)
        erased = UserData()
        while True:
            batch = await self._store.erase_jobs(user_id, ERASE_BATCH)
            erased += batch
            if batch.jobs < ERASE_BATCH:
                break
        erased += await self._store.erase_rest(user_id)
        left = await self._store.unfinished(user_id)
        log.info(
            "EraseUserData by %s: data key %s, %d jobs, %d schedules, %d credentials, "
            "%d usage rows folded (%d jobs cancelled first, %d created meanwhile left)",
            principal,
            "destroyed" if destroyed else "absent",
            erased.jobs,
            erased.schedules,
            erased.credentials,
            erased.usage_records,
            cancelled,
            left,
        )
        return Erased(erased, destroyed, unfinished=left, cancelled=cancelled)

    async def _cancel(self, user_id: str, principal: str) -> int:
        """Cancels every unfinished job of the user (a page at a time); how many."""
        selection = JobSelection(JobFilter(user_id=user_id), ())
        cancelled, token = 0, ""
        while True:
            page = await self._bulk.cancel_jobs(
                BulkRequest(
                    selection, principal, limit=MAX_LIMIT, page_token=token, reason=CANCEL_REASON
                )
            )
            cancelled += len(page.cancelled)
            token = page.next_page_token
            if not token:
                return cancelled
