"""Job types declared as a worker declares them, for tests that drive the job service
without a worker process (or before one starts): the job service runs no job type code,
so a type exists for it only once declared (ExecutorService.DeclareJobType)."""

from __future__ import annotations

from collections.abc import Iterable

from job_service.app import JobServiceApp
from job_service.domain.declared_types import JobTypes
from job_service.domain.job_types import JobType
from shared.grpc_client import ChannelConfig, aio_channel
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import executor_service_pb2_grpc
from shared.registry import JobDefinition, default_registry

DECLARER = "test-declarer"


async def declare(app: JobServiceApp, registry: Iterable[JobDefinition] | None = None) -> None:
    """Declares every type of ``registry`` (the shipped ones by default) to a running
    job service, through the use case DeclareJobType calls; a refusal fails the test."""
    assert app.declared is not None, "the job service has not started"
    for definition in registry if registry is not None else default_registry():
        await app.declared.declare(DECLARER, spec_of(definition))


async def declare_to(
    target: str, token: str, registry: Iterable[JobDefinition] | None = None
) -> None:
    """Declares every type of ``registry`` (the shipped ones by default) over gRPC, as a
    worker does, to a job service running in another process."""
    async with aio_channel(ChannelConfig(target=target, token=token)) as channel:
        stub = executor_service_pb2_grpc.ExecutorServiceStub(channel)  # type: ignore[no-untyped-call]
        for definition in registry if registry is not None else default_registry():
            request = epb.DeclareJobTypeRequest(worker_id=DECLARER, spec=spec_of(definition))
            await stub.DeclareJobType(request)


def job_types_of(registry: Iterable[JobDefinition] | None = None) -> JobTypes:
    """The job service's view of ``registry``'s types (the shipped ones by default), for
    unit tests of its use cases."""
    definitions = registry if registry is not None else default_registry()
    return JobTypes(JobType.from_spec(spec_of(d)) for d in definitions)
