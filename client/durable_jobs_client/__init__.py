"""A Python client for the durable AI job engine's JobService.

    from durable_jobs_client import JobsClient

    with JobsClient("localhost:50051", user_id="user-1", token="...") as jobs:
        job = jobs.create("synthetic", {"sleep_ms": 10}).job
        done = jobs.wait(job.id, timeout=60)

Both clients send signals (``signal``), read usage and cost (``get_usage``) and watch a job
with its model's text as it is generated (``watch(..., partial_output=True)`` yields
``Partial`` pieces between the states), and both reach ScheduleService over the same
channel as ``.schedules`` (``SchedulesClient`` / ``AsyncSchedulesClient``, specs from
``schedule_spec``). ``AsyncJobsClient`` has the same methods for asyncio, and also
``.credentials`` (CredentialService: ``AsyncCredentialsClient``) and for operators
``.admin`` (AdminService: ``AsyncAdminClient``). Settings not given as arguments come
from JOBS_JOB_SERVICE_TARGET, JOBS_AUTH_TOKEN (or JOBS_AUTH_TOKEN_FILE) and JOBS_TLS_* as
for every engine client.
Statuses by name and which ones end a job: ``durable_jobs_client.statuses``; the generated
messages: ``durable_jobs_client.protos``.
"""

from importlib.metadata import PackageNotFoundError, version

from durable_jobs_client._core import Partial, RetryPolicy, create_request
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
    JobFinished,
    JobNotCancellable,
    JobNotFound,
    JobNotRetryable,
    JobsError,
    LiveChildExists,
    LiveRetryExists,
    PermissionDenied,
    QuotaExceeded,
    ScheduleNotFound,
    SignalLimitReached,
    TooManyJobs,
    Unauthenticated,
    Unavailable,
    UnknownJobType,
    UserHasRunningJobs,
)
from durable_jobs_client.schedules import (
    AsyncSchedulesClient,
    Schedule,
    SchedulesClient,
    schedule_spec,
)
from durable_jobs_client.usage import Usage, UsageGroup, UsageTotals
from durable_jobs_client.values import plain, to_python

try:
    __version__ = version("durable-jobs-client")
except PackageNotFoundError:  # imported from a source tree without installing it
    __version__ = "0+unknown"

__all__ = [
    "AsyncAdminClient",
    "AsyncCredentialsClient",
    "AsyncJobsClient",
    "AsyncSchedulesClient",
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
    "JobFinished",
    "JobNotCancellable",
    "JobNotFound",
    "JobNotRetryable",
    "JobStatus",
    "JobsClient",
    "JobsError",
    "LiveChildExists",
    "LiveRetryExists",
    "Partial",
    "PermissionDenied",
    "QuotaExceeded",
    "RetryPolicy",
    "Schedule",
    "ScheduleNotFound",
    "SchedulesClient",
    "SignalLimitReached",
    "TooManyJobs",
    "Unauthenticated",
    "Unavailable",
    "UnknownJobType",
    "Usage",
    "UsageGroup",
    "UsageTotals",
    "UserHasRunningJobs",
    "create_request",
    "job_selection",
    "plain",
    "schedule_spec",
    "to_python",
]
