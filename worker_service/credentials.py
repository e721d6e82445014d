"""The provider key an attempt runs with.

A job on the platform's key needs nothing from here (None: the model router takes the
platform key for the tier from the environment). A job on its owner's key gets it from the
job service's ``ResolveCredential``, which answers only the holder of the job's current
lease. The key is returned to the caller and kept nowhere else; no message built here
contains it.
"""

from __future__ import annotations

import asyncio

from shared.credentials import CredentialMode
from shared.errors import CredentialNotFound, CredentialUnavailable, ErrorCode, ExecutionError
from worker_service.domain.errors import is_transient
from worker_service.domain.model import LockedJob
from worker_service.ports import ExecutorApi

CALL_TIMEOUT_S = 5.0
# Transport hiccups are retried briefly; the lease bounds the attempt anyway.
TRIES = 3
BACKOFF_S = 0.1


class CredentialResolver:
    """``resolve(locked_job)``: the user's key, or None for the platform's.

    Raises ``ExecutionError(CREDENTIAL_UNAVAILABLE)`` (never retried) when the job's key was
    deleted or cannot be opened, and ``LeaseLost`` when the lease is no longer this
    worker's: the attempt must then stop and report nothing."""

    def __init__(self, executor: ExecutorApi, *, call_timeout_s: float = CALL_TIMEOUT_S) -> None:
        self._executor = executor
        self._call_timeout_s = call_timeout_s

    async def resolve(self, job: LockedJob) -> str | None:
        if job.credential_mode is not CredentialMode.USER:
            return None
        backoff = BACKOFF_S
        for attempt in range(1, TRIES + 1):
            try:
                key = await self._executor.resolve_credential(
                    job.job_id, job.lease_token, timeout_s=self._call_timeout_s
                )
            except CredentialNotFound:
                raise ExecutionError(
                    ErrorCode.CREDENTIAL_UNAVAILABLE,
                    f"credential {job.credential_id} was deleted after the job was created",
                ) from None
            except CredentialUnavailable as refused:
                raise ExecutionError(
                    ErrorCode.CREDENTIAL_UNAVAILABLE,
                    f"credential {job.credential_id}: {refused.message}",
                ) from None
            except Exception as exc:
                if not is_transient(exc) or attempt == TRIES:
                    raise
                await asyncio.sleep(backoff)
                backoff *= 2
            else:
                return key.api_key
        raise AssertionError("unreachable")  # the loop returns or raises
