"""``JobsClient`` (blocking, ``durable_jobs_client.blocking``) and ``AsyncJobsClient``
(asyncio, ``durable_jobs_client.aio``): the same methods, the same retries and errors, over
one channel each (their own, or one the caller shares between clients).

Every call has a deadline (``timeout``, 30 s by default); UNAVAILABLE and
RESOURCE_EXHAUSTED are retried as ``RetryPolicy`` says, a create always with the same
idempotency key (made here when the caller gives none), so a retry never makes two jobs.
A refused call raises the ``JobsError`` subclass of its reason.
"""

from durable_jobs_client._core import DEFAULT_TIMEOUT
from durable_jobs_client.aio import AsyncJobsClient
from durable_jobs_client.blocking import Created, Job, JobsClient, Sent

__all__ = ["DEFAULT_TIMEOUT", "AsyncJobsClient", "Created", "Job", "JobsClient", "Sent"]
