"""The ExecutorService's messages as the worker's values, and its failures as the worker's
exceptions: ``shared.errors`` when the job service said why, else ``ExecutorUnreachable``
(the call may not have got through: retrying is safe) or ``ExecutorCallFailed``."""

from __future__ import annotations

import grpc

from shared.ai.steps import RecordedStep
from shared.credentials import CredentialMode
from shared.dependencies import DependencyOutput, DependencyPolicy
from shared.durable_steps import StepResult
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import (
    artifact_to_pb,
    dict_from_struct,
    recorded_step_from_pb,
    step_outcome_to_pb,
    step_result_from_pb,
    struct_from_dict,
    usage_to_pb,
)
from shared.registry import ChildJobDraft
from shared.rpc_errors import error_from_rpc, error_from_status
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable
from worker_service.domain.model import LockedJob, LockOutcome, LockResult, ResultSubmission

# Failures that say nothing about the call but that it did not get through (or its answer
# did not get back): retrying is safe, every executor call being fenced by its lease token.
TRANSIENT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)

# A refused batch item carries its code as the google.rpc.Code number.
_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}
_TRANSIENT_NAMES = frozenset(code.name for code in TRANSIENT_CODES)

_OUTCOMES = {
    pb.LOCK_OUTCOME_LOCKED: LockOutcome.LOCKED,
    pb.LOCK_OUTCOME_NOT_DUE: LockOutcome.NOT_DUE,
    pb.LOCK_OUTCOME_UNAVAILABLE: LockOutcome.UNAVAILABLE,
}
_STATUS_PREFIX = "JOB_STATUS_"
_POLICIES = {
    DependencyPolicy.RUN: job_pb2.DEPENDENCY_POLICY_RUN,
    DependencyPolicy.FAIL: job_pb2.DEPENDENCY_POLICY_FAIL,
    DependencyPolicy.CANCEL: job_pb2.DEPENDENCY_POLICY_CANCEL,
}


def result_message(submission: ResultSubmission) -> pb.SubmitResultRequest:
    """One SubmitResult item as the wire carries it (also used by tests playing a worker)."""
    result = submission.result
    return pb.SubmitResultRequest(
        job_id=submission.job_id,
        lease_token=submission.lease_token,
        output=struct_from_dict(result.output),
        output_hash=result.output_hash,
        artifacts=[artifact_to_pb(a) for a in result.artifacts],
        child_jobs=[child_message(c) for c in result.children],
        usage=[usage_to_pb(u) for u in result.usage],
    )


def child_message(child: ChildJobDraft) -> pb.ChildJob:
    """A projection's child job; a join names its siblings by their idempotency keys."""
    return pb.ChildJob(
        job_type=child.job_type,
        input=struct_from_dict(child.input),
        idempotency_key=child.idempotency_key,
        priority=child.priority,
        depends_on_keys=list(child.depends_on_keys),
        # a child that waits for nothing leaves the policy unset, as it was before joins
        dependency_policy=(
            _POLICIES[child.dependency_policy]
            if child.depends_on_keys
            else job_pb2.DEPENDENCY_POLICY_UNSPECIFIED
        ),
    )


def dependency_output(result: pb.DependencyResult) -> DependencyOutput:
    """One FetchDependencyResults item as job code sees it: the status in lower case
    ("succeeded", "failed", "cancelled"), unset fields as None."""
    return DependencyOutput(
        job_id=result.job_id,
        job_type=result.job_type,
        status=status_name(result.status).lower(),
        output=dict_from_struct(result.output) if result.HasField("output") else None,
        error_code=result.error_code or None,
        target_type=result.target_type or None,
        target_id=result.target_id or None,
    )


def lock_result(response: pb.LockJobResponse) -> LockResult | Exception:
    outcome = _OUTCOMES.get(response.outcome)
    if outcome is None:
        return ExecutorCallFailed(f"LockJobs answered outcome {response.outcome}")
    if outcome is LockOutcome.LOCKED:
        return LockResult(outcome, job=locked_job(response.job))
    if outcome is LockOutcome.NOT_DUE:
        retry_after = (
            response.retry_after.ToNanoseconds() / 1e9 if response.HasField("retry_after") else None
        )
        return LockResult(outcome, retry_after=retry_after)
    return LockResult(outcome)


def result_answer(outcome: pb.SubmitResultOutcome) -> str | Exception:
    """The status an accepted item ended in, or the error a refused one stands for, exactly
    as a single SubmitResult call would have failed."""
    if not outcome.HasField("error"):
        return status_name(outcome.status)
    error = error_from_status(outcome.error)
    if error is not None:
        return error
    code = _CODE_NAMES.get(outcome.error.code, str(outcome.error.code))
    if code in _TRANSIENT_NAMES:
        return ExecutorUnreachable(f"{code}: {outcome.error.message}")
    return ExecutorCallFailed(f"{code}: {outcome.error.message}")


def locked_job(job: pb.LockedJob) -> LockedJob:
    return LockedJob(
        job_id=job.job_id,
        job_type=job.job_type,
        lease_token=job.lease_token,
        attempt=job.attempt,
        input=dict_from_struct(job.input),
        lease_ttl_ms=job.lease_ttl_ms,
        heartbeat_interval_ms=job.heartbeat_interval_ms,
        user_id=job.user_id,
        prompt_key=job.prompt_key,
        prompt_version=job.prompt_version,
        credential_mode=(
            CredentialMode.USER
            if job.credential_mode == job_pb2.CREDENTIAL_MODE_USER
            else CredentialMode.PLATFORM
        ),
        credential_id=job.credential_id,
        recorded_steps=_recorded_steps(job),
        step_results=tuple(
            step_result_from_pb(r.ordinal, r.name, r.outcome, r.attempt) for r in job.step_results
        ),
        dependency_count=job.dependency_count,
    )


def _recorded_steps(job: pb.LockedJob) -> tuple[RecordedStep, ...]:
    """The job's recorded steps; one the worker cannot read is left out (its step is
    called again)."""
    steps = []
    for message in job.recorded_steps:
        try:
            steps.append(recorded_step_from_pb(message))
        except ValueError:
            continue
    return tuple(steps)


def step_result_request(
    job_id: str, lease_token: str, step: StepResult
) -> pb.RecordStepResultRequest:
    return pb.RecordStepResultRequest(
        job_id=job_id,
        lease_token=lease_token,
        ordinal=step.ordinal,
        name=step.name,
        outcome=step_outcome_to_pb(step),
    )


def stored_step_result(answer: pb.RecordStepResultResponse) -> StepResult | None:
    """The outcome an earlier call recorded (None when this call recorded it, or the
    stored one was not visible to it)."""
    if answer.recorded or not answer.HasField("stored"):
        return None
    s = answer.stored
    return step_result_from_pb(s.ordinal, s.name, s.outcome, s.attempt)


def status_name(status: int) -> str:
    try:
        name: str = job_pb2.JobStatus.Name(status)
        return name.removeprefix(_STATUS_PREFIX)
    except ValueError:
        return str(status)


def error_from_call(exc: grpc.aio.AioRpcError) -> Exception:
    try:
        error = error_from_rpc(exc)
    except ValueError:  # a status detail inconsistent with the call's status: ignore it
        error = None
    if error is not None:
        return error
    if exc.code() in TRANSIENT_CODES:
        return ExecutorUnreachable(f"{exc.code().name}: {exc.details()}")
    return ExecutorCallFailed(f"{exc.code().name}: {exc.details()}")
