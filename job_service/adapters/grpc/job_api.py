"""JobService: what product services call. Errors are raised, never aborted here: the
ErrorInterceptor translates them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from google.protobuf.message import DecodeError

from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.convert import (
    credential_mode_from_pb,
    dependency_policy_from_pb,
    instant_from_pb,
    job_to_pb,
    received_signal_to_pb,
)
from job_service.domain.admission import CreateRequest, Pins
from job_service.domain.jobs import Job
from job_service.usecases.admin import Admin
from job_service.usecases.jobs import Jobs
from job_service.usecases.new_jobs import MAX_CREATE_BATCH, Caller, NewJobs
from job_service.usecases.signals import Signals
from job_service.usecases.watch import WatchHub
from shared import tracing
from shared.errors import FieldViolation, InvalidInput, JobsError
from shared.pb.jobs.v1 import job_service_pb2 as pb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import dict_from_struct
from shared.rpc_errors import status_proto_for

# The ErrorInfo domain of a refused CreateJobs item: this service's full name.
JOB_DOMAIN = pb.DESCRIPTOR.services_by_name["JobService"].full_name


class JobServicer(job_service_pb2_grpc.JobServiceServicer):
    def __init__(
        self,
        new_jobs: NewJobs,
        jobs: Jobs,
        listings: Admin,
        watches: WatchHub,
        tokens: TokenTable,
        *,
        signals: Signals,
    ) -> None:
        self._new_jobs = new_jobs
        self._jobs = jobs
        self._signals = signals
        self._tokens = tokens
        self._listings = listings
        self._watches = watches

    async def CreateJob(
        self, request: pb.CreateJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateJobResponse:
        job, created = await self._new_jobs.create_job(
            _create_request(request), self._caller(context)
        )
        return pb.CreateJobResponse(job=job_to_pb(job), created=created)

    async def CreateJobs(
        self, request: pb.CreateJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateJobsResponse:
        if not 1 <= len(request.requests) <= MAX_CREATE_BATCH:  # before converting any
            raise InvalidInput(
                f"1..{MAX_CREATE_BATCH} requests per call",
                [FieldViolation("requests", f"1..{MAX_CREATE_BATCH} items")],
            )
        items: list[CreateRequest | JobsError] = []
        for asked in request.requests:
            try:
                items.append(_create_request(asked))
            except JobsError as error:  # a run_at out of range refuses only its item
                items.append(error)
        valid = [i for i in items if isinstance(i, CreateRequest)]
        caller = self._caller(context)
        stored = iter(await self._new_jobs.create_jobs(valid, caller) if valid else [])
        results: list[pb.CreateJobResult] = []
        for item in items:
            outcome = next(stored) if isinstance(item, CreateRequest) else item
            if isinstance(outcome, JobsError):
                results.append(pb.CreateJobResult(error=status_proto_for(outcome, JOB_DOMAIN)))
            else:
                job, created = outcome
                results.append(
                    pb.CreateJobResult(
                        response=pb.CreateJobResponse(job=job_to_pb(job), created=created)
                    )
                )
        return pb.CreateJobsResponse(results=results)

    def _caller(self, context: grpc.aio.ServicerContext) -> Caller:
        """The calling principal (recorded as a new job's creator) and its trace context."""
        metadata = context.invocation_metadata()
        return Caller(self._tokens.caller(metadata), tracing.incoming(metadata))

    async def GetJob(
        self, request: pb.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetJobResponse:
        job = await self._jobs.get_job(request.job_id, request.user_id)
        return pb.GetJobResponse(job=job_to_pb(job))

    async def CancelJob(
        self, request: pb.CancelJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelJobResponse:
        job = await self._jobs.cancel_job(request.job_id, request.user_id)
        return pb.CancelJobResponse(job=job_to_pb(job))

    async def ListJobs(
        self, request: pb.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobsResponse:
        jobs, token = await self._listings.list_user_jobs(
            request.user_id,
            request.page_size,
            request.page_token,
            target_type=request.target_type,
            target_id=request.target_id,
            id_suffix=request.id_suffix,
        )
        return pb.ListJobsResponse(jobs=[job_to_pb(j) for j in jobs], next_page_token=token)

    async def WatchJob(
        self, request: pb.WatchJobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchJobResponse]:
        # validates and checks ownership before the first answer
        first: Job | None = await self._jobs.get_job(request.job_id, request.user_id)

        async def read() -> Job | None:
            nonlocal first
            if first is not None:
                job, first = first, None
                return job
            return await self._jobs.find_job(request.job_id, request.user_id)

        async for item in self._watches.watch(
            request.job_id, read, partial_output=request.include_partial_output
        ):
            if isinstance(item, Job):
                yield pb.WatchJobResponse(job=job_to_pb(item))
                continue
            try:
                partial = pb.PartialOutput.FromString(item)
            except DecodeError:
                continue  # not from a worker of ours: nothing to pass on
            yield pb.WatchJobResponse(partial=partial)

    async def SendSignal(
        self, request: pb.SendSignalRequest, context: grpc.aio.ServicerContext
    ) -> pb.SendSignalResponse:
        sent = await self._signals.send(
            request.job_id,
            request.user_id,
            request.name,
            dict_from_struct(request.payload),
            request.idempotency_key,
        )
        return pb.SendSignalResponse(
            signal=received_signal_to_pb(sent.signal), created=sent.created
        )


def _create_request(request: pb.CreateJobRequest) -> CreateRequest:
    return CreateRequest(
        user_id=request.user_id,
        job_type=request.job_type,
        raw_input=dict_from_struct(request.input),
        idempotency_key=request.idempotency_key,
        priority=request.priority if request.HasField("priority") else None,
        credential_mode=credential_mode_from_pb(request.credential_mode),
        credential_id=request.credential_id,
        run_at=instant_from_pb(request, "run_at"),
        delay_s=request.delay.ToTimedelta().total_seconds() if request.HasField("delay") else None,
        pins=Pins(
            target_type=request.target_type,
            target_id=request.target_id,
            prompt_version=request.prompt_version,
            output_schema_version=request.output_schema_version,
        ),
        depends_on=tuple(request.depends_on),
        dependency_policy=dependency_policy_from_pb(request.dependency_policy),
        deadline=instant_from_pb(request, "deadline"),
    )
