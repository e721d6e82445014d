"""ExecutorService's SubmitResults: commit each result exactly once, fenced by its lease,
with its projection (artifacts, child jobs) and the attempt's usage rows.

The worker builds the projection; the job service holds it to what CreateJob demands of a
job and to what the parent's definition allows, checked against the stored job type (not
what the worker claims). A projection it cannot store fails the attempt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace

from job_service import metrics
from job_service.domain.admission import admit_child
from job_service.domain.attempts import Refusal, Submission, refusal
from job_service.domain.checks import MAX_ID_CHARS, not_json, require_batch, require_uuid
from job_service.domain.declared_types import JobTypes
from job_service.domain.dependencies import MAX_DEPENDENCIES
from job_service.domain.envelopes import OUTPUT, artifact_field
from job_service.domain.jobs import (
    MAX_ARTIFACT_BYTES_PER_JOB,
    MAX_ARTIFACT_TYPE_CHARS,
    MAX_ARTIFACTS_PER_JOB,
    NewChild,
    NewJob,
)
from job_service.domain.lifecycle import JobStatus
from job_service.ports.outbox import Handoff
from job_service.ports.results import ResultStore
from job_service.usecases.known_jobs import KnownJobs
from job_service.usecases.leases import Leases
from job_service.usecases.rate_limits import RateReservations
from job_service.usecases.sealing import Sealer
from shared import redaction
from shared.canonical import canonical_json, check_storable
from shared.credentials import CredentialMode
from shared.errors import ErrorCode, FieldViolation, InvalidInput, JobsError, LeaseLost
from shared.execution import ChildJobDraft
from shared.output_hash import matches as output_hash_matches


class Results:
    def __init__(
        self,
        registry: JobTypes,
        store: ResultStore,
        leases: Leases,
        handoff: Handoff,
        reservations: RateReservations,
        *,
        refresh: Callable[[], Awaitable[object]] | None = None,
        sealer: Sealer | None = None,
        known: KnownJobs | None = None,
    ) -> None:
        """``refresh``: reads the declared types again, for a type this replica does not
        know yet (declared at another replica a moment ago); ``sealer``: seals outputs,
        artifacts and children's inputs once checked (None: stored as they are);
        ``known``: the type, version and owner of jobs this replica granted (the rest are
        read)."""
        self._sealer = sealer or Sealer(None, None)
        self._known = known or KnownJobs(0)
        self._registry = registry
        self._refresh = refresh
        self._store = store
        self._leases = leases
        self._handoff = handoff
        self._reservations = reservations

    async def submit_results(
        self, submissions: Sequence[Submission]
    ) -> list[JobStatus | JobsError]:
        """Commits each result, answered per submission in order: its status, or the error
        that refused it (one refusal leaves the others untouched). The rate reservation
        of each attempt that ended is settled with its usage."""
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
        # every result is checked against its declared output schema (by its job's version)
        definitions, owners = await self._job_types([s.job_id for s in valid])
        types = {job_id: job_type for job_id, (job_type, _) in definitions.items()}
        await self._know(
            [*types.values(), *(c.job_type for s in with_children for c in s.children)]
        )
        for submission in valid:
            if bad := self._output_problem(submission, definitions.get(submission.job_id)):
                refused[submission.job_id] = bad
        valid = [self._redacted(s, types.get(s.job_id)) for s in valid]
        for submission in valid:
            if (too_many := _artifacts_past_limits(submission)) is not None:
                refused.setdefault(submission.job_id, too_many)
        if with_children:
            for submission in (s for s in valid if s.children):  # as redacted
                try:
                    children += self._children(submission, types.get(submission.job_id))
                except InvalidInput as error:
                    refused[submission.job_id] = error.message
        to_store = [s for s in valid if s.job_id not in refused]
        if self._sealer.enabled and to_store:
            to_store, children = await self._sealed(to_store, children, owners)
        stored_answers = await self._commit(to_store, children) if to_store else []
        metrics.stale_submit("SubmitResult", sum(isinstance(a, LeaseLost) for a in stored_answers))
        stored = iter(stored_answers)
        results: list[JobStatus | JobsError] = []
        for submission, answer in zip(submissions, answers, strict=True):
            if answer is not None:
                results.append(answer)
            elif submission.job_id in refused:
                results.append(await self._refuse(submission, refused[submission.job_id]))
            else:
                results.append(next(stored))
        await self._reservations.attempts_ended(
            [
                (s.job_id, s.usage)
                for s, a in zip(submissions, results, strict=True)
                if not isinstance(a, JobsError)
            ]
        )
        return results

    async def _job_types(
        self, job_ids: list[str]
    ) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
        """Each existing job's type and version (those granted here as kept since, the
        others read), and the owners of those kept (for sealing)."""
        known = self._known.take(job_ids)
        missing = [j for j in job_ids if j not in known]
        read = await self._store.job_types(missing) if missing else {}
        types = {**{j: (k.job_type, k.version) for j, k in known.items()}, **read}
        return types, {job_id: k.user_id for job_id, k in known.items()}

    async def _commit(
        self, results: Sequence[Submission], children: Sequence[NewChild]
    ) -> list[JobStatus | LeaseLost]:
        """Commits the results; the committed ones' outbox rows go to the dispatcher, the
        others are settled (``_settle_refused``)."""
        committed = await self._store.submit_results(results, children)
        self._handoff.hand_over(committed.handed)
        for job_type in committed.job_types.values():
            metrics.job_succeeded(job_type)
        return [
            JobStatus.SUCCEEDED
            if r.job_id in committed.job_types
            else await self._settle_refused(r)
            for r in results
        ]

    async def _sealed(
        self, results: list[Submission], children: list[NewChild], known_owners: dict[str, str]
    ) -> tuple[list[Submission], list[NewChild]]:
        """The results as stored: outputs, artifacts' payloads and children's snapshots
        sealed under the user's key, each bound to its own job (a job gone is left as it
        is: its submit is refused as a lost lease, nothing written)."""
        unknown = [r.job_id for r in results if r.job_id not in known_owners]
        owners = {**known_owners, **(await self._store.owners(unknown) if unknown else {})}
        seal = self._sealer.seal
        sealed = []
        for r in results:
            user = owners.get(r.job_id)
            if user is None:
                sealed.append(r)
                continue
            artifacts = [
                replace(
                    a,
                    payload=await seal(
                        user, r.job_id, artifact_field(a.artifact_type, a.artifact_id), a.payload
                    ),
                )
                for a in r.artifacts
            ]
            output = await seal(user, r.job_id, OUTPUT, r.output)
            sealed.append(replace(r, output=output, artifacts=artifacts))
        sealed_children = []
        for child in children:
            user = owners.get(child.parent_job_id)
            if user is not None:
                job = await self._sealer.sealed_job(replace(child.job, user_id=user))
                child = replace(child, job=replace(job, user_id=child.job.user_id))
            sealed_children.append(child)
        return sealed, sealed_children

    async def _settle_refused(self, result: Submission) -> JobStatus | LeaseLost:
        """A result the store refused: the repeat of a committed submit is answered
        SUCCEEDED again (and adds nothing); a cancel that won the race ends the attempt
        CANCELLED (the result is dropped, its usage stored); else the lease is lost."""
        state = await self._leases.lease_state(result.job_id)
        why = refusal(state, result.lease_token, result.output_hash)
        if why is Refusal.REPEAT:
            return JobStatus.SUCCEEDED
        if why is Refusal.CANCEL_WON:
            outcome = await self._leases.confirm_cancel(
                result.job_id, result.lease_token, result.usage
            )
            return outcome.status
        return LeaseLost("the lease on this job is no longer held")

    async def _know(self, job_types: Iterable[str]) -> None:
        if self._refresh is not None and not all(self._registry.knows(t) for t in job_types):
            await self._refresh()

    def _output_problem(self, submission: Submission, pinned: tuple[str, str] | None) -> str:
        """Why the output breaks its job's version's output schema ("": it does not, or the
        job is gone, and the submit is refused as a lost lease)."""
        if pinned is None:
            return ""
        job_type = self._registry.version(*pinned)
        if job_type is None:
            return f"job type {pinned[0]}@{pinned[1]} is not declared to this job service"
        return job_type.output_refusal(submission.output)

    def _redacted(self, submission: Submission, job_type: str | None) -> Submission:
        """The submission with its definition's output_redaction fields replaced by their
        hashes (seed 000 outputRedaction) in its output, and every copy of them in its
        artifacts and its children's inputs: what is stored and shown. ``output_hash``
        stays the hash of the whole output the worker produced."""
        if job_type is None:
            return submission  # no such job: refused as a lost lease anyway
        definition = self._registry.get(job_type)
        if not definition.output_redaction:
            return submission
        output = submission.output
        return replace(
            submission,
            output=redaction.stored_output(definition, output),
            artifacts=[
                replace(a, payload=redaction.scrubbed(definition, output, a.payload))
                for a in submission.artifacts
            ],
            children=[
                replace(c, input=redaction.scrubbed(definition, output, c.input))
                for c in submission.children
            ],
        )

    def _children(self, submission: Submission, parent_type: str | None) -> list[NewChild]:
        """The submission's child jobs, allowed by the parent's definition and admitted as
        CreateJob admits a job; InvalidInput says why not."""
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
        return [
            _joined(child, draft, submission.children)
            for child, draft in zip(children, submission.children, strict=True)
        ]

    def _new_child(self, draft: ChildJobDraft) -> NewJob:
        """A projection's child, admitted as CreateJob admits a job (its user is the
        parent's); refused with CreateJob's message, said of the child."""
        definition = self._registry.get(draft.job_type)
        try:
            return admit_child(definition, draft)
        except InvalidInput as error:
            raise InvalidInput(f"a child job's {error.message}", error.violations) from None

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


def _artifacts_past_limits(submission: Submission) -> str | None:
    """Why the result's artifacts are more than one job may store (GetJob shows a job's
    artifacts within a bounded answer), or None."""
    if len(submission.artifacts) > MAX_ARTIFACTS_PER_JOB:
        return (
            f"{len(submission.artifacts)} artifacts; a job stores at most {MAX_ARTIFACTS_PER_JOB}"
        )
    size = sum(
        len(canonical_json([a.artifact_type, a.artifact_id, a.payload]).encode())
        for a in submission.artifacts
    )
    if size > MAX_ARTIFACT_BYTES_PER_JOB:
        return (
            f"{size} bytes of artifacts; a job stores at most {MAX_ARTIFACT_BYTES_PER_JOB} "
            "bytes of JSON"
        )
    return None


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


def _joined(child: NewChild, draft: ChildJobDraft, drafts: Sequence[ChildJobDraft]) -> NewChild:
    """A join waits for the siblings its ``depends_on_keys`` name (each an idempotency key
    of another child of the same result, named once), found by (job type, key)."""
    if not draft.depends_on_keys:
        return child
    types = {d.idempotency_key: d.job_type for d in drafts if d is not draft}
    named = set(draft.depends_on_keys)
    if len(named) != len(draft.depends_on_keys) or not named <= types.keys():
        raise InvalidInput(
            "a join's depends_on_keys must name other children of the same result, once each"
        )
    if len(named) > MAX_DEPENDENCIES:
        raise InvalidInput(f"a join waits for at most {MAX_DEPENDENCIES} jobs")
    siblings = tuple(sorted((types[key], key) for key in named))
    return replace(child, siblings=siblings)
