"""ExecutorService's SubmitResults: commit each result exactly once, fenced by its lease,
with its projection (artifacts, child jobs) and the attempt's usage rows.

The worker builds the projection; the job service holds it to what CreateJob demands of a
job and to what the parent's definition allows, checked against the stored job type (not
what the worker claims). A projection it cannot store fails the attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from job_service import metrics
from job_service.domain.lifecycle import JobStatus
from job_service.domain.models import NewChild, NewJob, Submission
from job_service.ports.outbox import Waker
from job_service.ports.results import ResultStore
from job_service.usecases.checks import (
    MAX_ID_CHARS,
    MAX_INPUT_BYTES,
    not_json,
    priority_in_range,
    require_batch,
    require_name,
    require_uuid,
)
from job_service.usecases.jobs import new_job
from job_service.usecases.leases import Leases
from shared.canonical import canonical_json, check_storable
from shared.credentials import CredentialMode
from shared.errors import ErrorCode, FieldViolation, InvalidInput, JobsError, LeaseLost
from shared.output_hash import matches as output_hash_matches
from shared.registry import ChildJobDraft, Registry

MAX_ARTIFACT_TYPE_CHARS = 64


class Results:
    def __init__(
        self, registry: Registry, store: ResultStore, leases: Leases, outbox: Waker
    ) -> None:
        self._registry = registry
        self._store = store
        self._leases = leases
        self._outbox = outbox

    async def submit_results(
        self, submissions: Sequence[Submission]
    ) -> list[JobStatus | JobsError]:
        """Commits each result, answered per submission in order: its status, or the error
        that refused it (one refusal leaves the others untouched)."""
        require_batch("requests", submissions)
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
        redacting = any(d.output_redaction for d in self._registry)
        types: dict[str, str] = {}
        if with_children or (redacting and valid):
            looked_up = valid if redacting else with_children
            types = await self._store.job_types([s.job_id for s in looked_up])
        if redacting:
            valid = [self._redacted(s, types.get(s.job_id)) for s in valid]
        if with_children:
            for submission in with_children:
                try:
                    children += self._children(submission, types.get(submission.job_id))
                except InvalidInput as error:
                    refused[submission.job_id] = error.message
        to_store = [s for s in valid if s.job_id not in refused]
        stored_answers = await self._store.submit_results(to_store, children) if to_store else []
        metrics.stale_submit("SubmitResult", sum(isinstance(a, LeaseLost) for a in stored_answers))
        stored = iter(stored_answers)
        if any(a is not JobStatus.SUCCEEDED for a in stored_answers):
            # A refused result may have ended its attempt otherwise (a cancel that won):
            # rows the store did not hand to the dispatcher itself.
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

    def _redacted(self, submission: Submission, job_type: str | None) -> Submission:
        """The submission with its definition's output_redaction fields replaced by their
        hashes (seed 000 outputRedaction): what is stored and shown. ``output_hash``
        stays the hash of the whole output the worker produced."""
        if job_type is None:
            return submission  # no such job: refused as a lost lease anyway
        redacted = self._registry.get(job_type).redact_output(submission.output)
        return replace(submission, output=redacted)

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
            children.append(NewChild(submission.job_id, self._new_child(draft), inherits))
        return children

    def _new_child(self, draft: ChildJobDraft) -> NewJob:
        """A projection's child, held to what CreateJob demands (its user is the parent's)."""
        require_name("child_jobs.idempotency_key", draft.idempotency_key)
        if not priority_in_range(draft.priority):
            raise InvalidInput("a child job's priority is out of range")
        try:
            if len(canonical_json(draft.input).encode()) > MAX_INPUT_BYTES:
                raise InvalidInput("a child job's input is too large")
        except ValueError:
            raise not_json("child_jobs.input") from None
        definition = self._registry.get(draft.job_type)
        return new_job(definition, draft.input, "", draft.idempotency_key, draft.priority)

    async def _refuse(self, submission: Submission, reason: str) -> JobStatus | JobsError:
        """A projection the job service cannot store fails its attempt (the parent's
        result, artifacts and children are all dropped together)."""
        try:
            outcome = await self._leases.end_attempt(
                submission.job_id,
                submission.lease_token,
                ErrorCode.INTERNAL_PROJECTION_REFUSED,
                reason,
                submission.usage,
            )
        except LeaseLost as error:
            return error
        return outcome.status


def _submission_problem(submission: Submission, seen: set[str]) -> JobsError | None:
    """Why a submission cannot be stored as it is, or None."""
    try:
        require_uuid("job_id", submission.job_id)
        require_uuid("lease_token", submission.lease_token)
    except InvalidInput as error:
        return error
    if submission.job_id in seen:
        return InvalidInput(
            "the job appears twice in one call",
            [FieldViolation("job_id", "each job once per call")],
        )
    try:
        check_storable(submission.output)
        hashed = output_hash_matches(submission.output_hash, submission.output)
    except ValueError:
        return not_json("output")
    if not hashed:  # either scheme (shared.output_hash), so workers can upgrade one by one
        return InvalidInput(
            "output_hash does not match the output",
            [
                FieldViolation(
                    "output_hash",
                    "jcs:sha256: and the sha256 of the output's RFC 8785 JSON (or the legacy "
                    "bare hash)",
                )
            ],
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
