"""JobService's use cases on one job: create it, read it, cancel it (and its unfinished
descendants with it), and forget its snapshot once it has expired."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from job_service import metrics
from job_service.domain.lifecycle import JobStatus
from job_service.domain.models import Job, NewJob, QuotaRefusal, Quotas
from job_service.ports.jobs import BatchStore, CancelNotifier, CredentialOwnership, JobStore
from job_service.ports.outbox import Waker
from job_service.usecases.checks import (
    MAX_ID_CHARS,
    is_uuid,
    require_input,
    require_name,
    require_priority,
    require_schedule,
    require_target,
    require_uuid,
)
from shared import tracing
from shared.ai.prompts import PromptNotFound, get_prompt
from shared.canonical import content_hash
from shared.credentials import CredentialMode
from shared.errors import (
    FieldViolation,
    IdempotencyKeyReused,
    InvalidInput,
    JobAlreadyCancelled,
    JobNotCancellable,
    JobNotFound,
    JobsError,
    QuotaExceeded,
    TooManyJobs,
)
from shared.registry import JobDefinition, Registry

log = logging.getLogger(__name__)

# A user at the unfinished-jobs limit is told to come back after this (a guess: jobs
# finish in seconds to minutes).
ACTIVE_RETRY_AFTER_S = 5.0
SNAPSHOT_CLEAN_BATCH = 500
# A delayed job due within this long wakes the dispatcher at its time.
DELAYED_WAKE_HORIZON_S = 60.0
# CreateJobs' items per call.
MAX_CREATE_BATCH = 500
# QUOTA_EXCEEDED's ErrorInfo metadata "quota": which daily limit refused the create.
DAILY_JOBS = "daily_jobs"
DAILY_COST_BUDGET = "daily_cost_budget"

Created = tuple[Job, bool]


class Jobs:
    def __init__(
        self,
        registry: Registry,
        store: JobStore,
        notifier: CancelNotifier,
        outbox: Waker,
        credentials: CredentialOwnership,
        quotas: Quotas | None = None,
        batches: BatchStore | None = None,
    ) -> None:
        self._registry = registry
        self._store = store
        self._batches = batches or _NoBatches()
        self._notifier = notifier
        self._outbox = outbox
        self._credentials = credentials
        self._quotas = quotas or Quotas()

    async def create_job(
        self,
        user_id: str,
        job_type: str,
        raw_input: dict[str, Any],
        idempotency_key: str,
        priority: int | None,
        credential_mode: CredentialMode = CredentialMode.PLATFORM,
        credential_id: str = "",
        run_at: datetime | None = None,
        delay_s: float | None = None,
        pins: Pins | None = None,
        caller: Caller | None = None,
    ) -> tuple[Job, bool]:
        """The job, and whether this call created it (False: the idempotency key's job).
        With ``run_at`` or ``delay_s`` it is created CREATED and becomes due then;
        ``pins`` name its target and pin its prompt and output schema versions; ``caller``
        is recorded as its creator, and its trace is continued."""
        caller = caller or Caller()
        with tracing.span(
            "CreateJob",
            parent=caller.trace,
            kind=tracing.SERVER,
            attributes={"jobs.job_type": job_type},
        ):
            request = CreateRequest(
                user_id,
                job_type,
                raw_input,
                idempotency_key,
                priority,
                credential_mode,
                credential_id,
                run_at,
                delay_s,
                pins or Pins(),
            )
            new, due = await self._prepare(request)
            new = replace(new, trace=tracing.carrier(), created_by=caller.principal or None)
            job, created = self._settle(new, due, await self._store.create(new, self._quotas))
            tracing.set_attribute("jobs.job_id", job.id)
            return job, created

    async def create_jobs(self, requests: Sequence[CreateRequest]) -> list[Created | JobsError]:
        """CreateJob for each request, stored in one statement: per request, the job and
        whether it was created, or the error CreateJob would have raised for it alone."""
        if not 1 <= len(requests) <= MAX_CREATE_BATCH:
            raise InvalidInput(
                f"1..{MAX_CREATE_BATCH} requests per call",
                [FieldViolation("requests", f"1..{MAX_CREATE_BATCH} items")],
            )
        attributes = {"jobs.count": len(requests)}
        with tracing.span("CreateJobs", kind=tracing.SERVER, attributes=attributes):
            answers: list[Created | JobsError | None] = [None] * len(requests)
            prepared: dict[int, tuple[NewJob, datetime | None]] = {}
            first_of_key: dict[tuple[str, str, str], int] = {}
            repeats: dict[int, int] = {}
            for n, request in enumerate(requests):
                try:
                    new, due = await self._prepare(request)
                except JobsError as error:
                    answers[n] = error
                    continue
                if new.idempotency_key is not None:
                    key = (new.user_id, new.job_type, new.idempotency_key)
                    if key in first_of_key:  # judged after the first item with its key
                        repeats[n] = first_of_key[key]
                        prepared[n] = (new, due)
                        continue
                    first_of_key[key] = n
                prepared[n] = (new, due)
            order = [n for n in prepared if n not in repeats]
            if order:
                stored = await self._batches.create_many(
                    [prepared[n][0] for n in order], self._quotas, tracing.carrier()
                )
                for n, outcome in zip(order, stored, strict=True):
                    new, due = prepared[n]
                    try:
                        answers[n] = self._settle(new, due, outcome)
                    except JobsError as error:
                        answers[n] = error
            for n, first in repeats.items():
                earlier = answers[first]
                if isinstance(earlier, JobsError):
                    answers[n] = earlier
                    continue
                assert earlier is not None
                try:
                    answers[n] = self._settle(prepared[n][0], None, (earlier[0], False))
                except JobsError as error:
                    answers[n] = error
            return [a for a in answers if a is not None]

    @property
    def quotas(self) -> Quotas:
        return self._quotas

    async def prepare(self, request: CreateRequest) -> NewJob:
        """The job CreateJob would store for ``request`` (InvalidInput naming every bad
        field); nothing is stored. A schedule checks its template and builds each slot's
        job with it, so that its jobs are judged exactly as CreateJob judges one."""
        new, _ = await self._prepare(request)
        return new

    def settle(self, new: NewJob, stored: tuple[Job, bool] | QuotaRefusal) -> Created:
        """``_settle`` for a job stored inside a caller's transaction: the dispatcher is
        woken by the caller once that commits (``wake``)."""
        return self._settle(new, None, stored, wake=False)

    def wake(self) -> None:
        self._outbox.wake()

    def _settle(
        self,
        new: NewJob,
        due: datetime | None,
        stored: tuple[Job, bool] | QuotaRefusal,
        *,
        wake: bool = True,
    ) -> Created:
        """What the store's answer means for the caller: the job (waking the dispatcher for
        a new one), or the quota or idempotency error to raise."""
        if isinstance(stored, QuotaRefusal):
            raise self._quota_error(stored)
        job, created = stored
        if created:
            metrics.job_created(job.job_type, job.queue)
            # The store handed a due job's dispatch row to the dispatcher; a delayed job's
            # row is due at its time (a far one is found by the dispatcher's poll: no timer
            # held for it).
            wait = (due - datetime.now(UTC)).total_seconds() if due else 0.0
            if wake and due is not None and wait < DELAYED_WAKE_HORIZON_S:
                self._outbox.wake(after_s=max(0.0, wait))
        elif job.request_hash != new.request_hash:
            raise IdempotencyKeyReused(
                "this idempotency key was used for a different request",
                [FieldViolation("idempotency_key", "already used with other parameters")],
                metadata={"job_id": job.id},
            )
        return job, created

    async def _prepare(self, request: CreateRequest) -> tuple[NewJob, datetime | None]:
        """The validated job a request asks for, and when it is due (None: now); raises the
        InvalidInput (or UnknownJobType) naming every bad field. Nothing is stored."""
        pins = request.pins
        require_name("user_id", request.user_id)
        if request.idempotency_key:
            require_name("idempotency_key", request.idempotency_key)
        definition = self._registry.get(request.job_type)
        require_priority(request.priority)
        due = require_schedule(request.run_at, request.delay_s, datetime.now(UTC))
        require_input(request.raw_input)
        require_target(pins.target_type, pins.target_id)
        if bool(pins.target_type) != bool(pins.target_id):
            raise InvalidInput(
                "a target is a type and an id",
                [FieldViolation("target_id", "required with target_type")],
            )
        require_versions(definition, pins)
        credential = await self._check_credential(
            request.user_id, definition, request.credential_mode, request.credential_id
        )
        new = new_job(
            definition,
            request.raw_input,
            request.user_id,
            request.idempotency_key,
            request.priority,
            request.credential_mode,
            credential,
            due,
            pins,
        )
        return new, due

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

    async def _check_credential(
        self, user_id: str, definition: JobDefinition, mode: CredentialMode, credential_id: str
    ) -> str | None:
        """The job may run with this key: allowed by its type, and the user's own. The
        credential's id in canonical form, or None for the platform's key."""
        if mode not in definition.credential_modes:
            allowed = ", ".join(m.value for m in definition.credential_modes)
            raise InvalidInput(
                f"job type {definition.job_type} does not run with a {mode} key",
                [FieldViolation("credential_mode", f"{definition.job_type} allows: {allowed}")],
            )
        if mode is CredentialMode.PLATFORM:
            if credential_id:
                raise InvalidInput(
                    "credential_id is only for user keys",
                    [FieldViolation("credential_id", "only with CREDENTIAL_MODE_USER")],
                )
            return None
        if not credential_id:
            raise InvalidInput(
                "a user key needs credential_id",
                [FieldViolation("credential_id", "required with CREDENTIAL_MODE_USER")],
            )
        if not is_uuid(credential_id) or not await self._credentials.owned(credential_id, user_id):
            raise InvalidInput(
                "no such credential for this user",
                [FieldViolation("credential_id", "the id of one of this user's credentials")],
            )
        return str(uuid.UUID(credential_id))

    async def get_job(self, job_id: str, user_id: str) -> Job:
        require_uuid("job_id", job_id)
        require_name("user_id", user_id)
        job = await self._store.get(job_id, user_id)
        if job is None:
            raise JobNotFound("no such job")
        return job

    async def find_job(self, job_id: str, user_id: str) -> Job | None:
        """The job, or None when it is gone (ids already checked by get_job)."""
        return await self._store.get(job_id, user_id)

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
        await self._notify_cancel(requested)
        self._outbox.wake()
        return await self.get_job(job_id, user_id)

    async def _cancel_children_of_uncancellable(
        self, job_id: str, user_id: str, status: JobStatus
    ) -> Job:
        """A finished (or uncancellable) parent's unfinished descendants are cancelled with
        it and the parent is returned as it is; with none, the cancel is refused."""
        cascaded = await self._store.cancel_descendants(job_id, user_id)
        if cascaded:
            await self._notify_cancel(
                [j for j, after in cascaded if after is JobStatus.CANCEL_REQUESTED]
            )
            self._outbox.wake()
            return await self.get_job(job_id, user_id)
        if status is JobStatus.CANCELLED:
            raise JobAlreadyCancelled("the job is already cancelled")
        raise JobNotCancellable(f"a {status} job cannot be cancelled")

    async def _notify_cancel(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            try:
                await self._notifier.notify_cancel(job_id)
            except Exception:  # the worker's next heartbeat carries the cancel too
                log.warning("cancel notice for job %s not sent", job_id, exc_info=True)

    async def delete_expired_snapshots(self) -> int:
        """The snapshot cleaner's round: finished jobs' snapshots past their expiry."""
        return await self._store.delete_expired_snapshots(SNAPSHOT_CLEAN_BATCH)


def new_job(
    definition: JobDefinition,
    raw_input: dict[str, Any],
    user_id: str,
    idempotency_key: str,
    priority: int | None,
    credential_mode: CredentialMode = CredentialMode.PLATFORM,
    credential_id: str | None = None,
    next_run_at: datetime | None = None,
    pins: Pins | None = None,
) -> NewJob:
    """A validated job of ``definition`` (InvalidInput naming every bad field), due at
    ``next_run_at`` (None: now), with the target and versions ``pins`` names (checked by
    the caller), else the definition's."""
    pins = pins or Pins()
    validated = definition.validate_input(raw_input)
    target = (
        (pins.target_type, pins.target_id) if pins.target_type else definition.target_of(validated)
    )
    fairness_key, concurrency_key = definition.scheduling_keys(validated, user_id)
    snapshot = definition.snapshot(validated)
    effective_priority = definition.default_priority if priority is None else priority
    # what "the same request" means for an idempotency key
    request: dict[str, Any] = {
        "job_type": definition.job_type,
        "input": validated.model_dump(mode="json"),
        "priority": effective_priority,
    }
    if credential_id is not None:  # platform jobs hash as they always did
        request["credential_id"] = credential_id
    # so do jobs without a target or pinned versions
    if pins.target_type:
        request["target"] = [pins.target_type, pins.target_id]
    if pins.prompt_version:
        request["prompt_version"] = pins.prompt_version
    if pins.output_schema_version:
        request["output_schema_version"] = pins.output_schema_version
    return NewJob(
        user_id=user_id,
        job_type=definition.job_type,
        queue=definition.queue,
        priority=effective_priority,
        idempotency_key=idempotency_key or None,
        request_hash=content_hash(request),
        max_attempts=definition.max_attempts,
        timeout_ms=int(definition.timeout_s * 1000),
        input_schema_version=definition.input_schema_version,
        output_schema_version=pins.output_schema_version or definition.output_schema_version,
        definition_version=definition.version,
        snapshot=snapshot,
        snapshot_hash=content_hash(snapshot),
        snapshot_ttl_s=definition.snapshot_ttl_s,
        prompt_key=definition.prompt_key or None,
        prompt_version=pins.prompt_version or definition.prompt_version or None,
        model_tier=definition.model_tier or None,
        credential_mode=credential_mode,
        credential_id=credential_id,
        fairness_key=fairness_key,
        concurrency_key=concurrency_key,
        concurrency_limit=definition.concurrency_limit if concurrency_key else None,
        next_run_at=next_run_at,
        target_type=target[0] if target else None,
        target_id=target[1][:MAX_ID_CHARS] if target else None,
        redaction_version=definition.redaction_version,
    )


@dataclass(frozen=True)
class Caller:
    """Who calls CreateJob: the principal its bearer token maps to (stored as the job's
    ``created_by``), and the W3C trace context it sent (``traceparent`` metadata), which
    the job's trace continues."""

    principal: str = ""
    trace: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Pins:
    """CreateJob's optional target and version overrides (seed 000 §2.4): what the job is
    about, and the prompt and output schema versions it runs with instead of the
    definition's current ones."""

    target_type: str = ""
    target_id: str = ""
    prompt_version: str = ""
    output_schema_version: str = ""


def require_versions(definition: JobDefinition, pins: Pins) -> None:
    """Pinned versions must be ones this deployment knows: a registered version of the
    definition's prompt, and the output schema version its output model describes."""
    if pins.prompt_version:
        known = definition.prompt_key and _prompt_known(definition.prompt_key, pins.prompt_version)
        if not known:
            raise InvalidInput(
                f"unknown prompt version for {definition.job_type}",
                [
                    FieldViolation(
                        "prompt_version",
                        f"a registered version of prompt {definition.prompt_key!r}"
                        if definition.prompt_key
                        else f"{definition.job_type} has no prompt",
                    )
                ],
            )
    if pins.output_schema_version and pins.output_schema_version != (
        definition.output_schema_version
    ):
        raise InvalidInput(
            f"unknown output schema version for {definition.job_type}",
            [
                FieldViolation(
                    "output_schema_version",
                    f"{definition.job_type} produces version {definition.output_schema_version!r}",
                )
            ],
        )


def _prompt_known(key: str, version: str) -> bool:
    try:
        get_prompt(key, version)
    except PromptNotFound:
        return False
    return True


@dataclass(frozen=True)
class CreateRequest:
    """One CreateJob request, as CreateJob and each item of CreateJobs take it."""

    user_id: str
    job_type: str
    raw_input: dict[str, Any]
    idempotency_key: str = ""
    priority: int | None = None
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str = ""
    run_at: datetime | None = None
    delay_s: float | None = None
    pins: Pins = Pins()


class _NoBatches:
    async def create_many(
        self, news: Sequence[NewJob], quotas: Quotas, trace: dict[str, str] | None = None
    ) -> list[tuple[Job, bool] | QuotaRefusal]:
        raise NotImplementedError("this Jobs was built without a batch store")
