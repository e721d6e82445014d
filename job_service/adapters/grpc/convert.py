"""Domain values to protobuf messages."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.message import Message

from job_service.domain.dependencies import UNTIL_DEPENDENCIES_END
from job_service.domain.holds import Hold, HoldReason
from job_service.domain.jobs import InputState, Job
from job_service.domain.lifecycle import JobStatus
from job_service.domain.signals import ReceivedSignal
from shared.credentials import CredentialMode
from shared.dependencies import DependencyPolicy
from shared.errors import FieldViolation, InvalidInput
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import artifact_to_pb, timestamp

STATUS_TO_PB: dict[JobStatus, int] = {
    status: job_pb2.JobStatus.Value(f"JOB_STATUS_{status.name}") for status in JobStatus
}

CREDENTIAL_MODE_TO_PB: dict[CredentialMode, int] = {
    mode: job_pb2.CredentialMode.Value(f"CREDENTIAL_MODE_{mode.name}") for mode in CredentialMode
}
# UNSPECIFIED is the platform's key.
_CREDENTIAL_MODE_FROM_PB = {
    job_pb2.CREDENTIAL_MODE_UNSPECIFIED: CredentialMode.PLATFORM,
    **{number: mode for mode, number in CREDENTIAL_MODE_TO_PB.items()},
}


def credential_mode_from_pb(number: int) -> CredentialMode:
    """A request's credential_mode; InvalidInput for a number this build does not know."""
    try:
        return _CREDENTIAL_MODE_FROM_PB[number]
    except KeyError:
        raise InvalidInput(
            "credential_mode is not a known mode",
            [FieldViolation("credential_mode", "CREDENTIAL_MODE_PLATFORM or CREDENTIAL_MODE_USER")],
        ) from None


DEPENDENCY_POLICY_TO_PB: dict[DependencyPolicy, int] = {
    policy: job_pb2.DependencyPolicy.Value(f"DEPENDENCY_POLICY_{policy.name}")
    for policy in DependencyPolicy
}
_DEPENDENCY_POLICY_FROM_PB = {number: policy for policy, number in DEPENDENCY_POLICY_TO_PB.items()}


def dependency_policy_from_pb(number: int) -> DependencyPolicy | None:
    """A request's dependency_policy (None: unspecified); InvalidInput for a number this
    build does not know."""
    if number == job_pb2.DEPENDENCY_POLICY_UNSPECIFIED:
        return None
    try:
        return _DEPENDENCY_POLICY_FROM_PB[number]
    except KeyError:
        raise InvalidInput(
            "dependency_policy is not a known policy",
            [FieldViolation("dependency_policy", "RUN, FAIL or CANCEL")],
        ) from None


def instant_from_pb(message: Message, name: str, prefix: str = "") -> datetime | None:
    """A request's optional Timestamp field ``name`` as an aware datetime (None: unset);
    InvalidInput naming ``prefix + name`` for one beyond what datetime holds (years 1 to
    9999)."""
    if not message.HasField(name):
        return None
    try:
        return getattr(message, name).ToDatetime(tzinfo=UTC)  # type: ignore[no-any-return]
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"{prefix}{name} is out of range",
            [FieldViolation(prefix + name, "a valid timestamp")],
        ) from None


INPUT_STATE_TO_PB = {
    state: job_pb2.InputState.Value(f"INPUT_STATE_{state.name}") for state in InputState
}

HOLD_TO_PB = {
    reason: job_pb2.JobHold.Reason.Value(f"REASON_{reason.name}") for reason in HoldReason
}


def hold_to_pb(hold: Hold) -> job_pb2.JobHold:
    return job_pb2.JobHold(
        reason=HOLD_TO_PB[hold.reason],  # type: ignore[arg-type]
        key=hold.key,
        until=timestamp(hold.until),
        detail=hold.detail,
    )


def job_to_pb(job: Job, *, internal: bool = False) -> job_pb2.Job:
    """``internal``: an operator's view, with the internal error message. Never set it
    for an answer a job's owner receives."""
    message = job_pb2.Job(
        id=job.id,
        user_id=job.user_id,
        job_type=job.job_type,
        status=STATUS_TO_PB[job.status],  # type: ignore[arg-type]
        queue=job.queue,
        priority=job.priority,
        attempt_count=job.attempt_count,
        max_attempts=job.max_attempts,
        idempotency_key=job.idempotency_key or "",
        progress=job.progress,
        output_hash=job.output_hash or "",
        error_code=job.error_code or "",
        error_message=job.public_error_message or "",
        created_at=timestamp(job.created_at),
        updated_at=timestamp(job.updated_at),
        started_at=timestamp(job.started_at),
        finished_at=timestamp(job.finished_at),
        # a job waiting for its dependencies has no due time yet
        next_run_at=timestamp(
            None if job.next_run_at == UNTIL_DEPENDENCIES_END else job.next_run_at
        ),
        artifacts=[artifact_to_pb(a) for a in job.artifacts],
        events=[
            job_pb2.JobEvent(
                from_status=STATUS_TO_PB[e.from_status] if e.from_status else 0,  # type: ignore[arg-type]
                to_status=STATUS_TO_PB[e.to_status],  # type: ignore[arg-type]
                attempt=e.attempt,
                reason=e.reason or "",
                at=timestamp(e.at),
                worker_id=e.worker_id or "",
            )
            for e in job.events
        ],
        parent_job_id=job.parent_job_id or "",
        child_job_ids=job.child_job_ids,
        total_input_tokens=job.total_input_tokens,
        total_output_tokens=job.total_output_tokens,
        total_cost_usd=float(job.total_cost_usd),
        total_cost_usd_decimal=f"{job.total_cost_usd:.6f}",
        usage_unknown_attempts=job.usage_unknown_attempts,
        prompt_key=job.prompt_key or "",
        prompt_version=job.prompt_version or "",
        model_tier=job.model_tier or "",
        trigger=job.trigger,
        retried_from_job_id=job.retried_from_job_id or "",
        internal_error_message=(job.internal_error_message or "") if internal else "",
        credential_mode=CREDENTIAL_MODE_TO_PB[job.credential_mode],  # type: ignore[arg-type]
        credential_id=job.credential_id or "",
        definition_version=job.definition_version,
        concurrency_key=job.concurrency_key or "",
        target_type=job.target_type or "",
        target_id=job.target_id or "",
        model_provider=job.model_provider or "",
        model_name=job.model_name or "",
        output_schema_version=job.output_schema_version,
        schedule_id=job.schedule_id or "",
        scheduled_for=timestamp(job.scheduled_for),
        signals=[received_signal_to_pb(s) for s in job.signals],
        signals_total=job.signals_total,
        events_total=job.events_total,
        artifacts_total=job.artifacts_total,
        child_jobs_total=job.child_jobs_total,
        depends_on=job.depends_on,
        dependencies_total=job.dependencies_total,
        dependencies_pending=job.dependencies_pending,
        dependent_job_ids=job.dependent_job_ids,
        dependents_total=job.dependents_total,
        worker_id=job.worker_id or "",
        input_bytes=job.input_bytes,
        input_withheld_fields=job.input_withheld_fields,
        retried_as_job_ids=job.retried_as_job_ids,
        error_attempt=job.error_attempt,
        deadline=timestamp(job.deadline_at),
        steps=[
            job_pb2.DurableStep(
                ordinal=step.ordinal,
                name=step.name,
                attempt=step.attempt,
                recorded_at=timestamp(step.recorded_at),
                error_code=step.error_code or "",
            )
            for step in job.steps
        ],
        steps_total=job.steps_total,
    )
    if job.dependency_policy:
        policy = DependencyPolicy(job.dependency_policy)
        message.dependency_policy = DEPENDENCY_POLICY_TO_PB[policy]  # type: ignore[assignment]
    if internal:
        message.created_by = job.created_by or ""
    if job.hold is not None and (
        internal or job.hold.reason is HoldReason.WAITING_FOR_DEPENDENCIES
    ):
        message.hold.CopyFrom(hold_to_pb(job.hold))
    if job.validated_output is not None:
        message.output.update(job.validated_output)
    if job.input_state is not None:
        message.input_state = INPUT_STATE_TO_PB[job.input_state]  # type: ignore[assignment]
    if job.input is not None:
        message.input.update(job.input)
    return message


def received_signal_to_pb(signal: ReceivedSignal) -> job_pb2.ReceivedSignal:
    return job_pb2.ReceivedSignal(
        seq=signal.seq, name=signal.name, sent_at=timestamp(signal.sent_at)
    )
