"""job_service as the console sees it: one channel for every session, and over it a client
of the client library (``durable_jobs_client``) per request, made with the signed-in user's
token.

One channel serves every session (the token travels as call metadata, not as channel
credentials), so a page costs no new connection. A call is made once, with a 10 s
deadline: a page answers at once with what went wrong, and the user's reload is the retry.
"""

from __future__ import annotations

import grpc
from durable_jobs_client import (
    AsyncJobsClient,
    ClientConfig,
    JobsError,
    PermissionDenied,
    RetryPolicy,
    Unauthenticated,
)

CALL_TIMEOUT_S = 10.0
ONCE = RetryPolicy(attempts=1)
# The console's own connections: a new channel to a restarted job_service connects at once
# instead of inheriting the process-wide subchannel of the old one, still in its backoff.
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1),)
# The HTTP status of a page whose call job_service refused (anything else: 502).
HTTP_STATUS = {
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}

# All a visitor is told when job_service cannot be reached: no address, no gRPC text.
UNAVAILABLE = "The job service is unavailable. Try again in a moment."


class Backend:
    def __init__(self, config: ClientConfig) -> None:
        self._channel = config.aio_channel(CHANNEL_OPTIONS)

    def client(self, token: str) -> AsyncJobsClient:
        """The client library's client over the shared channel, acting with ``token``."""
        return AsyncJobsClient(
            channel=self._channel, token=token, timeout=CALL_TIMEOUT_S, retry=ONCE
        )

    async def close(self) -> None:
        await self._channel.close()


def signed_out(error: JobsError) -> bool:
    """A refused token (revoked, or its admin role taken away): the session is over."""
    return isinstance(error, Unauthenticated | PermissionDenied)


def describe(error: JobsError) -> str:
    """What to tell the user about a failed call (the service's own message)."""
    return error.message or code_of(error).name


def code_of(error: JobsError) -> grpc.StatusCode:
    return error.code or grpc.StatusCode.UNKNOWN
