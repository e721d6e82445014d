"""A Python client for the durable AI job engine's JobService.

    from durable_jobs_client import JobsClient

    with JobsClient("localhost:50051", user_id="user-1", token="...") as jobs:
        job = jobs.create("synthetic", {"sleep_ms": 10}).job
        done = jobs.wait(job.id, timeout=60)

``AsyncJobsClient`` has the same methods for asyncio, and for operators ``.admin``
(AdminService: ``AsyncAdminClient``) and ``.credentials`` (CredentialService:
``AsyncCredentialsClient``) over the same channel. Settings not given as arguments come
from JOBS_JOB_SERVICE_TARGET, JOBS_AUTH_TOKEN and JOBS_TLS_* as for every engine client.
"""

from durable_jobs_client._core import RetryPolicy, create_request
from durable_jobs_client._pb.jobs.v1.job_pb2 import Job, JobStatus
from durable_jobs_client._pb.jobs.v1.job_service_pb2 import CreateJobRequest, CreateJobResponse
from durable_jobs_client.admin import AsyncAdminClient, job_selection
from durable_jobs_client.client import AsyncJobsClient, JobsClient
from durable_jobs_client.config import ClientConfig
from durable_jobs_client.credentials import AsyncCredentialsClient, Credential
from durable_jobs_client.errors import (
    ConfigError,
    CredentialNotFound,
    CredentialUnavailable,
    DeadlineExceeded,
    FieldViolation,
    IdempotencyKeyReused,
    InternalError,
    InvalidInput,
    JobAlreadyCancelled,
    JobNotCancellable,
    JobNotFound,
    JobNotRetryable,
    JobsError,
    PermissionDenied,
    QuotaExceeded,
    TooManyJobs,
    Unauthenticated,
    Unavailable,
    UnknownJobType,
)

__all__ = [
    "AsyncAdminClient",
    "AsyncCredentialsClient",
    "AsyncJobsClient",
    "ClientConfig",
    "ConfigError",
    "CreateJobRequest",
    "CreateJobResponse",
    "Credential",
    "CredentialNotFound",
    "CredentialUnavailable",
    "DeadlineExceeded",
    "FieldViolation",
    "IdempotencyKeyReused",
    "InternalError",
    "InvalidInput",
    "Job",
    "JobAlreadyCancelled",
    "JobNotCancellable",
    "JobNotFound",
    "JobNotRetryable",
    "JobStatus",
    "JobsClient",
    "JobsError",
    "PermissionDenied",
    "QuotaExceeded",
    "RetryPolicy",
    "TooManyJobs",
    "Unauthenticated",
    "Unavailable",
    "UnknownJobType",
    "create_request",
    "job_selection",
]
