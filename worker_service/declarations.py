"""Declaring the job types this worker runs: the job service runs no job type code, so a
worker tells it what each of its types is, as data (``JobTypeSpec``, rendered from the
Python definition), before it takes any job. A type the job service refuses — a malformed
spec, or another spec stored for the same (job_type, version) — is logged and not run."""

from __future__ import annotations

import logging

import grpc

from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import executor_service_pb2_grpc
from shared.registry import Registry
from shared.rpc_errors import error_from_rpc

log = logging.getLogger(__name__)

# Refusals that name what is wrong with the spec: declaring it again would be refused again.
_REFUSED = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)


async def declare_job_types(
    channel: grpc.aio.Channel, worker_id: str, registry: Registry
) -> Registry:
    """Declares every type of ``registry``; the registry of those the job service took.
    Any other failure (the job service unreachable) raises, for the caller to retry."""
    stub = executor_service_pb2_grpc.ExecutorServiceStub(channel)  # type: ignore[no-untyped-call]
    accepted = []
    for definition in registry:
        request = pb.DeclareJobTypeRequest(worker_id=worker_id, spec=spec_of(definition))
        try:
            await stub.DeclareJobType(request)
        except grpc.aio.AioRpcError as error:
            if error.code() is grpc.StatusCode.UNIMPLEMENTED:
                # a job service older than declarations (a rolling upgrade): it loads the
                # job types itself, as it always did
                log.warning("the job service takes no job type declarations; none made")
                return registry
            if error.code() not in _REFUSED:
                raise
            refusal = error_from_rpc(error)
            fields = ", ".join(v.field for v in refusal.violations) if refusal else ""
            log.error(
                "job type %s@%s refused by the job service, not run by this worker: %s (%s)",
                definition.job_type,
                definition.version,
                error.details(),
                fields,
            )
            continue
        accepted.append(definition)
    return Registry(accepted)
