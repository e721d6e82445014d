"""The generated messages, for callers that build requests or read answers field by field
(``protos.job_pb2.Job``, ``protos.admin_service_pb2.JobSelection``, ...). They are the
package ``jobs.v1`` of proto/jobs/v1, generated with the client (``make gen``)."""

from durable_jobs_client._pb.jobs.v1 import (
    admin_service_pb2,
    credential_service_pb2,
    job_pb2,
    job_service_pb2,
    schedule_service_pb2,
    usage_service_pb2,
)

__all__ = [
    "admin_service_pb2",
    "credential_service_pb2",
    "job_pb2",
    "job_service_pb2",
    "schedule_service_pb2",
    "usage_service_pb2",
]
