"""JobService's CreateJob and CreateJobs, and the job of a schedule's slot: each request
admitted (``domain/admission.py``), its credential found to be the user's, stored with its
quotas, and the rows the store wrote for this replica's dispatcher handed over."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from job_service import metrics
from job_service.domain.admission import CreateRequest, admit, screen, unknown_credential
from job_service.domain.declared_types import JobTypes
from job_service.domain.jobs import DataKeyChanged, Job, NewJob
from job_service.domain.outbox import OutboxMessage
from job_service.domain.quotas import QuotaRefusal, Quotas
from job_service.ports.jobs import BatchStore, CredentialOwnership, NewJobStore, Stored
from job_service.ports.outbox import Handoff, Waker
from job_service.usecases.sealing import Sealer
from shared import tracing
from shared.errors import (
    FieldViolation,
    IdempotencyKeyReused,
    InvalidInput,
    JobNotFound,
    JobsError,
    QuotaExceeded,
    TooManyJobs,
)

# A user at the unfinished-jobs limit is told to come back after this (a guess: jobs
# finish in seconds to minutes).
ACTIVE_RETRY_AFTER_S = 5.0
# A delayed job due within this long wakes the dispatcher at its time.
DELAYED_WAKE_HORIZON_S = 60.0
# CreateJobs' items per call.
MAX_CREATE_BATCH = 500
# QUOTA_EXCEEDED's ErrorInfo metadata "quota": which daily limit refused the create.
DAILY_JOBS = "daily_jobs"
DAILY_COST_BUDGET = "daily_cost_budget"

Created = tuple[Job, bool]


@dataclass(frozen=True)
class Caller:
    """Who calls CreateJob or CreateJobs: the principal its bearer token maps to (stored as
    each job's ``created_by``), and the W3C trace context it sent (``traceparent``
    metadata), which the jobs' trace continues."""

    principal: str = ""
    trace: Mapping[str, str] | None = None


class NewJobs:
    def __init__(
        self,
        registry: JobTypes,
        store: NewJobStore,
        batches: BatchStore,
        credentials: CredentialOwnership,
        handoff: Handoff,
        outbox: Waker,
        quotas: Quotas | None = None,
        *,
        refresh: Callable[[], Awaitable[object]] | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        """``refresh``: reads the declared types again, for a type this replica does not
        know yet (declared at another replica a moment ago); ``sealer``: seals each job's
        snapshot, once admitted, before it is stored (None: stored as it is)."""
        self._sealer = sealer or Sealer(None, None)
        self._registry = registry
        self._refresh = refresh
        self._store = store
        self._batches = batches
        self._credentials = credentials
        self._handoff = handoff
        self._outbox = outbox
        self._quotas = quotas or Quotas()

    @property
    def quotas(self) -> Quotas:
        return self._quotas

    async def create_job(self, request: CreateRequest, caller: Caller | None = None) -> Created:
        """The job, and whether this call created it (False: the idempotency key's job).
        With ``run_at`` or ``delay_s`` it is created CREATED and becomes due then;
        ``pins`` name its target and pin its prompt and output schema versions; ``caller``
        is recorded as its creator, and its trace is continued."""
        caller = caller or Caller()
        with tracing.span(
            "CreateJob",
            parent=caller.trace,
            kind=tracing.SERVER,
            attributes={"jobs.job_type": request.job_type},
        ):
            new = await self.prepare(request)
            new = replace(new, trace=tracing.carrier(), created_by=caller.principal or None)
            new, (stored, handed) = await self._stored(request, new)
            self._handoff.hand_over(handed)
            job, created = self._settle(new, stored)
            tracing.set_attribute("jobs.job_id", job.id)
            # a repeat answers the stored job: its output may be sealed
            return await self._sealer.opened(job), created

    async def create_jobs(
        self, requests: Sequence[CreateRequest], caller: Caller | None = None
    ) -> list[Created | JobsError]:
        """CreateJob for each request, stored in one statement: per request, the job and
        whether it was created, or the error CreateJob would have raised for it alone."""
        if not 1 <= len(requests) <= MAX_CREATE_BATCH:
            raise InvalidInput(
                f"1..{MAX_CREATE_BATCH} requests per call",
                [FieldViolation("requests", f"1..{MAX_CREATE_BATCH} items")],
            )
        caller = caller or Caller()
        with tracing.span(
            "CreateJobs",
            parent=caller.trace,
            kind=tracing.SERVER,
            attributes={"jobs.count": len(requests)},
        ):
            answers: list[Created | JobsError | None] = [None] * len(requests)
            prepared: dict[int, NewJob] = {}
            first_of_key: dict[tuple[str, str, str], int] = {}
            repeats: dict[int, int] = {}
            for n, request in enumerate(requests):
                try:
                    # fresh: the batch's statement does not check the key it was sealed under
                    new = await self.prepare(request, fresh=True)
                except JobsError as error:
                    answers[n] = error
                    continue
                prepared[n] = replace(new, created_by=caller.principal or None)
                if new.idempotency_key is not None:
                    key = (new.user_id, new.job_type, new.idempotency_key)
                    if key in first_of_key:  # judged after the first item with its key
                        repeats[n] = first_of_key[key]
                        continue
                    first_of_key[key] = n
            # a job with dependencies is attached to them in a transaction of its own
            dependent = [n for n in prepared if n not in repeats and prepared[n].dependencies]
            for n in dependent:
                prepared[n], (outcome, handed_one) = await self._stored(requests[n], prepared[n])
                self._handoff.hand_over(handed_one)
                answers[n] = self._answer(prepared[n], outcome)
            order = [n for n in prepared if n not in repeats and n not in dependent]
            if order:
                stored, handed = await self._batches.create_many(
                    [prepared[n] for n in order], self._quotas, tracing.carrier()
                )
                self._handoff.hand_over(handed)
                for n, outcome in zip(order, stored, strict=True):
                    answers[n] = self._answer(prepared[n], outcome)
            for n, first in repeats.items():
                earlier = answers[first]
                assert earlier is not None
                if isinstance(earlier, JobsError):
                    answers[n] = earlier
                else:
                    answers[n] = self._answer(prepared[n], (earlier[0], False))
            return [
                a if isinstance(a, JobsError) else (await self._sealer.opened(a[0]), a[1])
                for a in answers
                if a is not None
            ]

    async def prepare(self, request: CreateRequest, *, fresh: bool = False) -> NewJob:
        """The job CreateJob would store for ``request``, admitted (InvalidInput naming
        every bad field), its credential the user's own, sealed (``fresh``: under the key
        the store holds now, see ``Sealer.sealed_job``); nothing is stored. A schedule
        checks its template and builds each slot's job with it, so that its jobs are judged
        exactly as CreateJob judges one."""
        if self._refresh is not None and not self._registry.knows(request.job_type):
            await self._refresh()
        screened = screen(self._registry, request, datetime.now(UTC))
        credential = screened.credential_id
        if credential is not None and not await self._credentials.owned(
            credential, request.user_id
        ):
            raise unknown_credential()
        if screened.dependencies:
            await self._require_owned(screened.dependencies.job_ids, request)
        return await self._sealer.sealed_job(admit(screened), fresh=fresh)

    async def _stored(
        self, request: CreateRequest, new: NewJob
    ) -> tuple[NewJob, tuple[Stored, list[OutboxMessage]]]:
        """CreateJob's statement for ``new``; once more, sealed under the user's key as the
        store holds it now, when the key ``new`` was sealed under (this replica's cached
        one) is no longer the user's: destroyed by an erase on another replica, or
        re-wrapped by a rotation. The job as stored, and the statement's answer."""
        try:
            return new, await self._store.create(new, self._quotas)
        except DataKeyChanged:
            self._sealer.forget(new.user_id)
            again = await self.prepare(request, fresh=True)
            again = replace(again, trace=new.trace, created_by=new.created_by)
            return again, await self._store.create(again, self._quotas)

    async def _require_owned(self, job_ids: Sequence[str], request: CreateRequest) -> None:
        """Every dependency is a job of the request's user (another user's is not found
        either): so no cycle can be built, as a job can only wait for jobs older than it."""
        owned = await self._store.owned(list(job_ids), request.user_id)
        if len(owned) == len(job_ids):
            return
        given = {str(uuid.UUID(j)): i for i, j in enumerate(request.depends_on)}
        missing = sorted((given[j], j) for j in job_ids if j not in owned)
        job_id = missing[0][1]
        raise JobNotFound(
            f"no job {job_id} of this user to depend on ({len(missing)} not found)",
            [
                FieldViolation(f"depends_on[{index}]", "a job of this user")
                for index, _ in missing[:100]
            ],
            metadata={"job_id": job_id},
        )

    def settle(self, new: NewJob, stored: Stored) -> Created:
        """``_settle`` for a job stored inside a caller's transaction: the dispatcher is
        woken by the caller once that commits (``wake``)."""
        return self._settle(new, stored, wake=False)

    def wake(self) -> None:
        self._outbox.wake()

    def _answer(self, new: NewJob, stored: Stored) -> Created | JobsError:
        try:
            return self._settle(new, stored)
        except JobsError as error:
            return error

    def _settle(self, new: NewJob, stored: Stored, *, wake: bool = True) -> Created:
        """What the store's answer means for the caller: the job (waking the dispatcher for
        a new delayed one), or the quota or idempotency error to raise."""
        if isinstance(stored, QuotaRefusal):
            raise self._quota_error(stored)
        job, created = stored
        if created:
            metrics.job_created(job.job_type, job.queue)
            # The store handed a due job's dispatch row over; a delayed job's row is due at
            # its time (a far one is found by the dispatcher's poll: no timer held for it).
            due = new.next_run_at
            wait = (due - datetime.now(UTC)).total_seconds() if due else 0.0
            if wake and due is not None and wait < DELAYED_WAKE_HORIZON_S:
                self._outbox.wake(after_s=max(0.0, wait))
        elif job.request_hash not in (new.request_hash, new.legacy_request_hash):
            raise IdempotencyKeyReused(
                "this idempotency key was used for a different request",
                [FieldViolation("idempotency_key", "already used with other parameters")],
                metadata={"job_id": job.id},
            )
        return job, created

    def _quota_error(self, refusal: QuotaRefusal) -> JobsError:
        """The limit a refusal hit: unfinished jobs, then the day's jobs, then the day's
        cost; the two daily ones name themselves (ErrorInfo ``quota``) and last until the
        next UTC midnight."""
        limits = self._quotas
        if limits.max_active and refusal.active >= limits.max_active:
            return TooManyJobs(
                f"at most {limits.max_active} unfinished jobs per user",
                retry_after_s=ACTIVE_RETRY_AFTER_S,
            )
        now = datetime.now(UTC)
        midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        until_midnight = round((midnight - now).total_seconds(), 3)
        over_daily = limits.daily and refusal.today >= limits.daily
        if not over_daily and limits.daily_cost_usd and refusal.spent >= limits.daily_cost_usd:
            budget = f"{limits.daily_cost_usd:.2f}"
            return QuotaExceeded(
                f"the daily cost budget of {budget} USD per user (UTC) is spent",
                retry_after_s=until_midnight,
                metadata={
                    "quota": DAILY_COST_BUDGET,
                    "budget_usd": f"{limits.daily_cost_usd:f}",
                    "spent_usd": f"{refusal.spent:f}",
                },
            )
        return QuotaExceeded(
            f"at most {limits.daily} jobs per user per day (UTC)",
            retry_after_s=until_midnight,
            metadata={"quota": DAILY_JOBS},
        )
