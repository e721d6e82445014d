"""What the fake service decides as job_service does: a new job (its status, its
idempotency key), a cancel, which jobs a selection names, a retry as a new job, the counts
of CountJobs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2, status_pb2

from durable_jobs_client._pb.jobs.v1 import admin_service_pb2 as apb
from durable_jobs_client._pb.jobs.v1 import job_pb2
from durable_jobs_client._pb.jobs.v1 import job_service_pb2 as pb
from durable_jobs_client.errors import (
    IdempotencyKeyReused,
    InvalidInput,
    JobNotRetryable,
    JobsError,
    LiveChildExists,
    LiveRetryExists,
    UnknownJobType,
)
from durable_jobs_client.statuses import TERMINAL
from durable_jobs_client.testing._service import (
    JobServiceState,
    copy_of,
    new_id,
    now_stamp,
    refusal,
)

RERUNNABLE = frozenset({job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED})
# CancelJob's transitions (job_service's lifecycle table)
CANCELS = {
    job_pb2.JOB_STATUS_CREATED: job_pb2.JOB_STATUS_CANCELLED,
    job_pb2.JOB_STATUS_QUEUED: job_pb2.JOB_STATUS_CANCELLED,
    job_pb2.JOB_STATUS_RETRYING: job_pb2.JOB_STATUS_CANCELLED,
    job_pb2.JOB_STATUS_RUNNING: job_pb2.JOB_STATUS_CANCEL_REQUESTED,
}
EVERY = [s for s in job_pb2.JobStatus.values() if s]
# the fields a retry copies from the job it re-runs
COPIED = (
    *("user_id", "job_type", "input", "queue", "priority", "max_attempts", "parent_job_id"),
    *("target_type", "target_id", "prompt_key", "prompt_version", "output_schema_version"),
    *("credential_mode", "credential_id"),
)


def cancel(service: JobServiceState, job: job_pb2.Job) -> bool:
    """Cancels ``job`` and its unfinished descendants as CancelJob does; whether the job
    itself moved."""
    for child_id in job.child_job_ids:
        if child_id in service.jobs:
            cancel(service, service.jobs[child_id])
    if job.status not in CANCELS:
        return False
    service.update(job.id, status=CANCELS[job.status])
    return True


def status_of(error: JobsError) -> status_pb2.Status:
    """A refusal as a ``google.rpc.Status`` with its ErrorInfo (a RetryJobs outcome)."""
    code = error.code or grpc.StatusCode.UNKNOWN
    status = status_pb2.Status(code=code.value[0], message=error.message)
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=error.reason))
    return status


def aware(moment: datetime) -> datetime:
    """A datetime as the client sends it: one without a zone is UTC (``FromDatetime``)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def matches(job: job_pb2.Job, **where: Any) -> bool:
    """Whether ``job`` passes every filter given (empty, None or 0: no filter), as
    AdminService.ListJobs and a JobSelection filter."""
    created = job.created_at.ToDatetime(UTC)
    after, before = where.get("created_after"), where.get("created_before")
    return (
        all(not where.get(f) or getattr(job, f) == where[f] for f in FILTERS)
        and (after is None or created >= aware(after))
        and (before is None or created < aware(before))
    )


FILTERS = ("job_type", "status", "queue", "user_id", "target_type", "target_id")


def selector(selection: apb.JobSelection) -> Any:
    """The jobs a bulk action's selection names: its ids, or its filters; empty or both
    refused, as job_service refuses them."""
    where: dict[str, Any] = {f: getattr(selection, f) for f in FILTERS}
    for bound in ("created_after", "created_before"):
        if selection.HasField(bound):
            where[bound] = getattr(selection, bound).ToDatetime(UTC)
    has_filter = any(v for v in where.values())
    if not selection.job_ids and not has_filter:
        raise refusal(InvalidInput, "the selection is empty; it would name every job")
    if selection.job_ids and has_filter:
        raise refusal(InvalidInput, "give job_ids or filters, not both")
    if selection.job_ids:
        return lambda job: job.id in selection.job_ids
    return lambda job: matches(job, **where)


def rerun(service: JobServiceState, job_id: str) -> job_pb2.Job:
    """A failed or cancelled job again, as a new job (AdminService.RetryJob), held to one
    live retry per job and one live child per parent and type."""
    old = service.job(job_id)
    if old.status not in RERUNNABLE:
        status = job_pb2.JobStatus.Name(old.status).removeprefix("JOB_STATUS_").lower()
        raise refusal(JobNotRetryable, f"a {status} job cannot be retried")
    for retry_id in old.retried_as_job_ids:
        if retry_id in service.jobs and service.jobs[retry_id].status not in RERUNNABLE:
            raise refusal(
                LiveRetryExists,
                f"this job's original already has a retry that is waiting, running or "
                f"succeeded ({retry_id}); retry that one when it fails",
            )
    parent = service.jobs.get(old.parent_job_id)
    for sibling_id in parent.child_job_ids if parent is not None else ():
        sibling = service.jobs.get(sibling_id)
        same = sibling is not None and sibling.job_type == old.job_type and sibling.id != old.id
        if same and sibling is not None and sibling.status not in RERUNNABLE:
            raise refusal(
                LiveChildExists,
                f"the parent already has a {old.job_type} child that is unfinished or "
                f"succeeded ({sibling.id}); retry that one when it fails",
            )
    new = job_pb2.Job(id=new_id(), status=job_pb2.JOB_STATUS_QUEUED, retried_from_job_id=old.id)
    for name in COPIED:
        if name == "input":
            new.input.CopyFrom(old.input)
        else:
            setattr(new, name, getattr(old, name))
    now_stamp(new.created_at)
    new.updated_at.CopyFrom(new.created_at)
    new.next_run_at.CopyFrom(new.created_at)
    old.retried_as_job_ids.append(new.id)
    if parent is not None:
        parent.child_job_ids.append(new.id)
        parent.child_jobs_total += 1
    service.put(new)
    return new


def counts(jobs: Iterable[job_pb2.Job], since: datetime, until: datetime) -> apb.CountJobsResponse:
    """CountJobs over ``jobs``: created in [since, until) by status now, finished in it,
    every unfinished job now, and the delayed ones among them (created, due later)."""
    jobs, since, until = list(jobs), aware(since), aware(until)

    def inside(stamp: Timestamp) -> bool:
        return stamp.seconds > 0 and since <= stamp.ToDatetime(tzinfo=UTC) < until

    def by_status(chosen: Iterable[job_pb2.Job], statuses: Iterable[int]) -> list[Any]:
        found = Counter(int(j.status) for j in chosen)
        return [apb.StatusCount(status=s, count=found[s]) for s in statuses]  # type: ignore[arg-type]

    unfinished = [j for j in jobs if j.status not in TERMINAL]
    answer = apb.CountJobsResponse(
        created=by_status((j for j in jobs if inside(j.created_at)), EVERY),
        finished=by_status((j for j in jobs if inside(j.finished_at)), sorted(TERMINAL)),
        unfinished=by_status(unfinished, [s for s in EVERY if s not in TERMINAL]),
        delayed=sum(
            1
            for j in unfinished
            if j.status == job_pb2.JOB_STATUS_CREATED
            and j.next_run_at.ToDatetime(tzinfo=UTC) > datetime.now(UTC)
        ),
    )
    answer.since.FromDatetime(since)
    answer.until.FromDatetime(until)
    return answer


def made(service: JobServiceState, request: pb.CreateJobRequest) -> pb.CreateJobResponse:
    """A new job, or the one the same idempotency key made (IdempotencyKeyReused if
    asked for something else)."""
    if not request.job_type:
        raise refusal(InvalidInput, "job_type is required")
    known = {d.job_type: d for d in service.definitions}
    if known and request.job_type not in known:
        raise refusal(UnknownJobType, f"no job type {request.job_type!r}")
    asked = request.SerializeToString(deterministic=True)

    def make() -> tuple[bytes, str]:
        return asked, new_job(service, request, known.get(request.job_type)).id

    key = ("create", request.user_id, request.idempotency_key)
    (first, job_id), created = service.once(key, make)
    if first != asked:
        raise refusal(IdempotencyKeyReused, "the idempotency key was used for another job")
    answer = pb.CreateJobResponse(job=copy_of(service.jobs[job_id], internal=False))
    answer.job.ClearField("input")  # as CreateJob answers: a read shows the input
    answer.job.input_state = job_pb2.INPUT_STATE_UNSPECIFIED
    answer.created = created
    return answer


def new_job(service: JobServiceState, request: pb.CreateJobRequest, definition: Any) -> job_pb2.Job:
    needs = [service.job(d, request.user_id) for d in request.depends_on]
    waiting = sum(1 for d in needs if d.status not in TERMINAL)
    job = job_pb2.Job(
        id=new_id(),
        user_id=request.user_id,
        job_type=request.job_type,
        input=request.input,
        idempotency_key=request.idempotency_key,
        queue=definition.queue if definition else "",
        priority=request.priority if request.HasField("priority") else 0,
        max_attempts=definition.max_attempts if definition else 0,
        target_type=request.target_type,
        target_id=request.target_id,
        prompt_version=request.prompt_version,
        output_schema_version=request.output_schema_version,
        credential_mode=request.credential_mode,
        credential_id=request.credential_id,
        depends_on=request.depends_on,
        dependencies_total=len(needs),
        dependencies_pending=waiting,
        dependency_policy=request.dependency_policy,
        input_state=job_pb2.INPUT_STATE_SHOWN,
    )
    now_stamp(job.created_at)
    job.updated_at.CopyFrom(job.created_at)
    due = datetime.now(UTC)
    if request.HasField("run_at"):
        due = request.run_at.ToDatetime(UTC)
    elif request.HasField("delay"):
        due += request.delay.ToTimedelta()
    if not waiting:
        job.next_run_at.FromDatetime(due)
    later = due > datetime.now(UTC) + timedelta(seconds=1)
    job.status = job_pb2.JOB_STATUS_CREATED if waiting or later else job_pb2.JOB_STATUS_QUEUED
    for needed in needs:
        needed.dependent_job_ids.append(job.id)
        needed.dependents_total += 1
    service.put(job)
    return job
