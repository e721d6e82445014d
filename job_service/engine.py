"""The use cases of the job service, written against the ports.

Servicers translate protobuf to these calls and back; everything a request must satisfy
is checked here, before anything is written.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from job_service import metrics
from job_service.domain.lifecycle import JobStatus
from job_service.domain.models import (
    AttemptFacts,
    FailureOutcome,
    HeartbeatAck,
    Job,
    LockGrant,
    LockRefusal,
    NewChild,
    NewJob,
    QuotaRefusal,
    Quotas,
    Submission,
)
from job_service.domain.retry import Outcome, RetryDecision, RetryPolicy
from job_service.ports import CancelNotifier, CredentialOwnership, Decide, JobStore, Waker
from shared import tracing
from shared.ai.provider import UsageRecord
from shared.canonical import canonical_json, check_storable, content_hash
from shared.credentials import CredentialMode
from shared.errors import (
    ErrorClass,
    ErrorCode,
    FieldViolation,
    IdempotencyKeyReused,
    InvalidInput,
    JobAlreadyCancelled,
    JobNotCancellable,
    JobNotFound,
    JobsError,
    LeaseLost,
    QuotaExceeded,
    TooManyJobs,
    classify,
)
from shared.registry import ChildJobDraft, JobDefinition, Registry

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_ID_CHARS = 255
MAX_ARTIFACT_TYPE_CHARS = 64
# The class prefix decides retries (shared.errors.classify); the column holds 100 characters.
ERROR_CODE_PATTERN = re.compile(r"[A-Z][A-Z0-9_]{0,99}")
# The canonical JSON of a job's input may not exceed this (documented in the README).
MAX_INPUT_BYTES = 256 * 1024
# Nesting of a job's input (objects and lists); deeper is refused before validation.
# (Protobuf itself stops a Struct near 32 levels: 3 message levels per JSON level.)
MAX_INPUT_DEPTH = 20
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
MAX_ERROR_MESSAGE_CHARS = 4000
REAP_BATCH = 100
REDISPATCH_BATCH = 500
# A user at the unfinished-jobs limit is told to come back after this (a guess: jobs
# finish in seconds to minutes).
ACTIVE_RETRY_AFTER_S = 5.0
# Items one batch RPC may carry.
MAX_BATCH = 256
# Wake the dispatcher just after a retry becomes due, not just before.
WAKE_MARGIN_S = 0.01
# A provider's Retry-After delays a retry by at most this much.
MAX_RETRY_AFTER_S = 600.0
SNAPSHOT_CLEAN_BATCH = 500


class JobEngine:
    def __init__(
        self,
        registry: Registry,
        store: JobStore,
        notifier: CancelNotifier,
        outbox: Waker,
        credentials: CredentialOwnership,
        quotas: Quotas | None = None,
    ) -> None:
        self._registry = registry
        self._store = store
        self._notifier = notifier
        self._outbox = outbox
        self._credentials = credentials
        self._quotas = quotas or Quotas()
        self._policies = {d.job_type: RetryPolicy.of(d) for d in registry}

    # --- JobService --------------------------------------------------------------------

    async def create_job(
        self,
        user_id: str,
        job_type: str,
        raw_input: dict[str, Any],
        idempotency_key: str,
        priority: int | None,
        credential_mode: CredentialMode = CredentialMode.PLATFORM,
        credential_id: str = "",
    ) -> tuple[Job, bool]:
        with tracing.span("CreateJob", kind=tracing.SERVER, attributes={"jobs.job_type": job_type}):
            job, created = await self._create_job(
                user_id,
                job_type,
                raw_input,
                idempotency_key,
                priority,
                credential_mode,
                credential_id,
            )
            tracing.set_attribute("jobs.job_id", job.id)
            return job, created

    async def _create_job(
        self,
        user_id: str,
        job_type: str,
        raw_input: dict[str, Any],
        idempotency_key: str,
        priority: int | None,
        credential_mode: CredentialMode,
        credential_id: str,
    ) -> tuple[Job, bool]:
        _require_name("user_id", user_id)
        if idempotency_key:
            _require_name("idempotency_key", idempotency_key)
        definition = self._registry.get(job_type)
        if priority is not None and not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise InvalidInput(
                "priority is out of range",
                [FieldViolation("priority", f"must be within {MIN_PRIORITY}..{MAX_PRIORITY}")],
            )
        try:
            encoded = canonical_json(raw_input).encode()
        except ValueError:
            raise not_json("input") from None
        if _depth(raw_input) > MAX_INPUT_DEPTH:
            raise InvalidInput(
                "input is nested too deeply",
                [FieldViolation("input", f"at most {MAX_INPUT_DEPTH} levels of objects/lists")],
            )
        if len(encoded) > MAX_INPUT_BYTES:
            raise InvalidInput(
                "input is too large",
                [FieldViolation("input", f"at most {MAX_INPUT_BYTES} bytes of JSON")],
            )
        credential = await self._check_credential(
            user_id, definition, credential_mode, credential_id
        )
        new = replace(
            _new_job(
                definition,
                raw_input,
                user_id,
                idempotency_key,
                priority,
                credential_mode,
                credential,
            ),
            trace=tracing.carrier(),
        )
        stored = await self._store.create(new, self._quotas)
        if isinstance(stored, QuotaRefusal):
            raise self._quota_error(stored)
        job, created = stored
        if created:
            metrics.job_created(job_type, definition.queue)
            self._outbox.wake()
        elif job.request_hash != new.request_hash:
            raise IdempotencyKeyReused(
                "this idempotency key was used for a different request",
                [FieldViolation("idempotency_key", "already used with other parameters")],
            )
        return job, created

    def _quota_error(self, refusal: QuotaRefusal) -> JobsError:
        limits = self._quotas
        if limits.max_active and refusal.active >= limits.max_active:
            return TooManyJobs(
                f"at most {limits.max_active} unfinished jobs per user",
                retry_after_s=ACTIVE_RETRY_AFTER_S,
            )
        now = datetime.now(UTC)
        midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        return QuotaExceeded(
            f"at most {limits.daily} jobs per user per day (UTC)",
            retry_after_s=round((midnight - now).total_seconds(), 3),
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
        if not _is_uuid(credential_id) or not await self._credentials.owned(credential_id, user_id):
            raise InvalidInput(
                "no such credential for this user",
                [FieldViolation("credential_id", "the id of one of this user's credentials")],
            )
        return str(uuid.UUID(credential_id))

    async def get_job(self, job_id: str, user_id: str) -> Job:
        _require_uuid("job_id", job_id)
        _require_name("user_id", user_id)
        job = await self._store.get(job_id, user_id)
        if job is None:
            raise JobNotFound("no such job")
        return job

    async def find_job(self, job_id: str, user_id: str) -> Job | None:
        """The job, or None when it is gone (ids already checked by get_job)."""
        return await self._store.get(job_id, user_id)

    async def cancel_job(self, job_id: str, user_id: str) -> Job:
        _require_uuid("job_id", job_id)
        _require_name("user_id", user_id)
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

    # --- ExecutorService ---------------------------------------------------------------

    async def lock_jobs(
        self, job_ids: Sequence[str], worker_id: str
    ) -> list[LockGrant | LockRefusal]:
        """A lease on each lockable job, answered per id in order. A malformed, unknown or
        repeated id is refused: a job is never granted twice in one answer."""
        _require_name("worker_id", worker_id)
        _require_batch("requests", job_ids)
        distinct = list(dict.fromkeys(j for j in job_ids if _is_uuid(j)))
        answers = dict(zip(distinct, await self._store.lock(distinct, worker_id), strict=True))
        refused = LockRefusal()
        return [answers.pop(job_id, refused) for job_id in job_ids]

    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck:
        _require_uuid("job_id", job_id)
        _require_uuid("lease_token", lease_token)
        return await self._counting_stale(
            "Heartbeat", self._store.heartbeat(job_id, lease_token, progress)
        )

    async def submit_results(
        self, submissions: Sequence[Submission]
    ) -> list[JobStatus | JobsError]:
        """Commits each result, answered per submission in order: its status, or the error
        that refused it (one refusal leaves the others untouched)."""
        _require_batch("requests", submissions)
        answers: list[JobStatus | JobsError | None] = []
        valid: list[Submission] = []
        seen: set[str] = set()
        for submission in submissions:
            problem = _submission_problem(submission, seen)
            answers.append(problem)
            if problem is None:
                valid.append(submission)
                seen.add(submission.job_id)
        refused: dict[str, str] = {}
        children: list[NewChild] = []
        with_children = [s for s in valid if s.children]
        if with_children:
            types = await self._store.job_types([s.job_id for s in with_children])
            for submission in with_children:
                try:
                    children += self._children(submission, types.get(submission.job_id))
                except InvalidInput as error:
                    refused[submission.job_id] = error.message
        to_store = [s for s in valid if s.job_id not in refused]
        stored_answers = await self._store.submit_results(to_store, children) if to_store else []
        metrics.stale_submit("SubmitResult", sum(isinstance(a, LeaseLost) for a in stored_answers))
        stored = iter(stored_answers)
        self._outbox.wake()
        results: list[JobStatus | JobsError] = []
        for submission, answer in zip(submissions, answers, strict=True):
            if answer is not None:
                results.append(answer)
            elif submission.job_id in refused:
                results.append(await self._refuse(submission, refused[submission.job_id]))
            else:
                results.append(next(stored))
        return results

    def _children(self, submission: Submission, parent_type: str | None) -> list[NewChild]:
        """The submission's child jobs, validated as CreateJob would validate them and
        allowed by the parent's definition; InvalidInput says why not."""
        if parent_type is None:
            return []  # no such job: its submit is refused as a lost lease anyway
        allowed = self._registry.get(parent_type).child_job_types
        keys: set[tuple[str, str]] = set()
        children = []
        for draft in submission.children:
            if draft.job_type not in allowed:
                raise InvalidInput(f"a {parent_type} job may not create {draft.job_type!r} jobs")
            if (draft.job_type, draft.idempotency_key) in keys:
                raise InvalidInput("two child jobs share a type and idempotency key")
            keys.add((draft.job_type, draft.idempotency_key))
            inherits = CredentialMode.USER in self._registry.get(draft.job_type).credential_modes
            children.append(
                NewChild(submission.job_id, _new_child(self._registry, draft), inherits)
            )
        return children

    async def _refuse(self, submission: Submission, reason: str) -> JobStatus | JobsError:
        """A projection the job service cannot store fails its attempt (the parent's
        result, artifacts and children are all dropped together)."""
        try:
            outcome = await self._store.end_attempt(
                submission.job_id,
                submission.lease_token,
                ErrorCode.INTERNAL_PROJECTION_REFUSED,
                reason[:MAX_ERROR_MESSAGE_CHARS],
                self.decide,
                submission.usage,
            )
        except LeaseLost as error:
            return error
        self._wake_for(outcome)
        return outcome.status

    async def delete_expired_snapshots(self) -> int:
        return await self._store.delete_expired_snapshots(SNAPSHOT_CLEAN_BATCH)

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        usage: Sequence[UsageRecord] = (),
        retry_after_s: float = 0.0,
    ) -> FailureOutcome:
        _require_uuid("job_id", job_id)
        _require_uuid("lease_token", lease_token)
        if not ERROR_CODE_PATTERN.fullmatch(error_code):
            raise InvalidInput(
                "error_code is malformed",
                [FieldViolation("error_code", "an upper-case code such as PROVIDER_TIMEOUT")],
            )
        outcome = await self._counting_stale(
            "SubmitFailure",
            self._store.end_attempt(
                job_id,
                lease_token,
                error_code,
                # operator detail: kept even when odd, but never a NUL (text columns refuse it)
                error_message.replace("\x00", "\ufffd")[:MAX_ERROR_MESSAGE_CHARS],
                self._deciding_no_sooner_than(retry_after_s),
                usage,
            ),
        )
        self._wake_for(outcome)
        return outcome

    def _deciding_no_sooner_than(self, retry_after_s: float) -> Decide:
        """``decide``, with a retry scheduled no sooner than a provider's Retry-After."""
        floor = min(max(0.0, retry_after_s), MAX_RETRY_AFTER_S)
        if floor <= 0:
            return self.decide

        def decide(facts: AttemptFacts, code: str) -> RetryDecision:
            decision = self.decide(facts, code)
            if decision.outcome is Outcome.RETRY and decision.delay_s < floor:
                return replace(decision, delay_s=floor)
            return decision

        return decide

    async def reap_expired_leases(self) -> int:
        outcomes = await self._store.reap_expired_leases(REAP_BATCH, self.decide)
        for outcome in outcomes:
            self._wake_for(outcome)
        return len(outcomes)

    async def redispatch_stranded(self, after_s: float) -> int:
        """The dispatch reconciler's round: waiting jobs whose dispatch left the outbox
        ``after_s`` seconds ago and that no worker has locked since get a new one. NATS
        may lose a message (a store lost, a stream recreated); the database decides."""
        count = await self._store.redispatch_stranded(after_s, REDISPATCH_BATCH)
        if count:
            log.warning("re-dispatching %d jobs whose dispatch message was not acted on", count)
            self._outbox.wake()
        return count

    def decide(self, facts: AttemptFacts, code: str) -> RetryDecision:
        """The retry decision for a failed attempt of a RUNNING job. A worker that
        reports CANCELLED although no cancel was asked for is treated as an internal
        error: only CancelJob ends a job cancelled."""
        if classify(code) is ErrorClass.CANCELLED:
            code = ErrorCode.INTERNAL_ERROR
        policy = replace(self._policies[facts.job_type], max_attempts=facts.max_attempts)
        return policy.decide(facts.attempt, code)

    @staticmethod
    async def _counting_stale(rpc: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except LeaseLost:
            metrics.stale_submit(rpc)
            raise

    def _wake_for(self, outcome: FailureOutcome) -> None:
        """A retry's dispatch row is due at next_run_at; a terminal status wrote a domain
        event that is due now. (Only a hint: the database clock decides what is due.)"""
        if outcome.next_run_at is not None:
            delay = (outcome.next_run_at - datetime.now(UTC)).total_seconds()
            self._outbox.wake(after_s=max(0.0, delay) + WAKE_MARGIN_S)
        else:
            self._outbox.wake()


def _new_job(
    definition: JobDefinition,
    raw_input: dict[str, Any],
    user_id: str,
    idempotency_key: str,
    priority: int | None,
    credential_mode: CredentialMode = CredentialMode.PLATFORM,
    credential_id: str | None = None,
) -> NewJob:
    """A validated job of ``definition`` (InvalidInput naming every bad field)."""
    validated = definition.validate_input(raw_input)
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
    request_hash = content_hash(request)
    return NewJob(
        user_id=user_id,
        job_type=definition.job_type,
        queue=definition.queue,
        priority=effective_priority,
        idempotency_key=idempotency_key or None,
        request_hash=request_hash,
        max_attempts=definition.max_attempts,
        timeout_ms=int(definition.timeout_s * 1000),
        input_schema_version=definition.input_schema_version,
        output_schema_version=definition.output_schema_version,
        definition_version=definition.version,
        snapshot=snapshot,
        snapshot_hash=content_hash(snapshot),
        snapshot_ttl_s=definition.snapshot_ttl_s,
        prompt_key=definition.prompt_key or None,
        prompt_version=definition.prompt_version or None,
        model_tier=definition.model_tier or None,
        credential_mode=credential_mode,
        credential_id=credential_id,
    )


def _new_child(registry: Registry, draft: ChildJobDraft) -> NewJob:
    """A projection's child, held to what CreateJob demands (its user is the parent's)."""
    _require_name("child_jobs.idempotency_key", draft.idempotency_key)
    if draft.priority is not None and not MIN_PRIORITY <= draft.priority <= MAX_PRIORITY:
        raise InvalidInput("a child job's priority is out of range")
    try:
        if len(canonical_json(draft.input).encode()) > MAX_INPUT_BYTES:
            raise InvalidInput("a child job's input is too large")
    except ValueError:
        raise not_json("child_jobs.input") from None
    definition = registry.get(draft.job_type)
    return _new_job(definition, draft.input, "", draft.idempotency_key, draft.priority)


def not_json(field: str) -> InvalidInput:
    """NaN, infinities and NUL characters fit in a protobuf Struct, not in jsonb."""
    return InvalidInput(
        f"{field} cannot be stored as JSON",
        [FieldViolation(field, "finite numbers and strings without NUL characters only")],
    )


def _depth(value: Any) -> int:
    """Levels of nesting of a JSON-like value, without recursion (deep input is hostile)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
    return deepest


def _submission_problem(submission: Submission, seen: set[str]) -> JobsError | None:
    """Why a submission cannot be stored as it is, or None."""
    try:
        _require_uuid("job_id", submission.job_id)
        _require_uuid("lease_token", submission.lease_token)
    except InvalidInput as error:
        return error
    if submission.job_id in seen:
        return InvalidInput(
            "the job appears twice in one call",
            [FieldViolation("job_id", "each job once per call")],
        )
    try:
        output_hash = content_hash(submission.output)
    except ValueError:
        return not_json("output")
    if output_hash != submission.output_hash:
        return InvalidInput(
            "output_hash does not match the output",
            [FieldViolation("output_hash", "must be the sha256 of the canonical output")],
        )
    try:
        for artifact in submission.artifacts:
            check_storable([artifact.artifact_type, artifact.artifact_id, artifact.payload])
    except ValueError:
        return not_json("artifacts")
    keys = [(a.artifact_type, a.artifact_id) for a in submission.artifacts]
    if any(
        not 0 < len(t) <= MAX_ARTIFACT_TYPE_CHARS or not 0 < len(i) <= MAX_ID_CHARS for t, i in keys
    ):
        return InvalidInput(
            "an artifact's type or id is empty or too long",
            [
                FieldViolation(
                    "artifacts",
                    f"artifact_type 1..{MAX_ARTIFACT_TYPE_CHARS} and artifact_id "
                    f"1..{MAX_ID_CHARS} characters",
                )
            ],
        )
    if len(set(keys)) != len(keys):
        return InvalidInput(
            "artifacts repeat an (artifact_type, artifact_id)",
            [FieldViolation("artifacts", "each (artifact_type, artifact_id) once")],
        )
    return None


def _require_batch(name: str, items: Sequence[object]) -> None:
    if not 1 <= len(items) <= MAX_BATCH:
        raise InvalidInput(
            f"{name} must hold 1..{MAX_BATCH} items",
            [FieldViolation(name, f"1..{MAX_BATCH} items")],
        )


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _require_uuid(name: str, value: str) -> None:
    if not _is_uuid(value):
        raise InvalidInput(f"{name} is not a valid id", [FieldViolation(name, "must be a UUID")])


def _require_name(name: str, value: str) -> None:
    if not value or len(value) > MAX_ID_CHARS or not value.isprintable():
        raise InvalidInput(
            f"{name} is missing or malformed",
            [FieldViolation(name, f"1..{MAX_ID_CHARS} printable characters")],
        )


# For the other use cases (job_service.operations): the same checks, one spelling.
require_name = _require_name
require_uuid = _require_uuid
