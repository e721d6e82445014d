"""``AsyncCredentialsClient``: CredentialService, a user's own provider keys.

Reached as ``AsyncJobsClient(...).credentials``, acting for the client's ``user_id`` unless
a call names another. A key goes in once (``put``) and never comes back: every answer shows
it by its fingerprint only.
"""

from __future__ import annotations

import grpc

from durable_jobs_client._pb.jobs.v1 import credential_service_pb2 as cpb
from durable_jobs_client._pb.jobs.v1 import credential_service_pb2_grpc
from durable_jobs_client.admin import AsyncCall

Credential = cpb.Credential


class AsyncCredentialsClient:
    """CredentialService's calls as coroutines."""

    def __init__(self, call: AsyncCall, channel: grpc.aio.Channel, user_id: str) -> None:
        self._call = call
        self._stub = credential_service_pb2_grpc.CredentialServiceStub(channel)  # type: ignore[no-untyped-call]
        self.user_id = user_id

    async def put(
        self,
        provider: str,
        api_key: str,
        *,
        label: str = "",
        user_id: str | None = None,
        idempotency_key: str = "",
    ) -> Credential:
        """Stores a key; the answer has its id and fingerprint. With an ``idempotency_key``
        the call is replayed after UNAVAILABLE (the key makes a second call answer what the
        first stored); without one it is not: a second call would store it twice."""
        request = cpb.PutCredentialRequest(
            user_id=user_id or self.user_id,
            provider=provider,
            api_key=api_key,
            label=label,
            idempotency_key=idempotency_key,
        )
        response = await self._call(
            self._stub.PutCredential,
            request,
            cpb.PutCredentialResponse,
            replay_safe=bool(idempotency_key),
        )
        return response.credential

    async def list(self, *, user_id: str | None = None) -> list[Credential]:
        """The user's credentials, newest first."""
        request = cpb.ListCredentialsRequest(user_id=user_id or self.user_id)
        response = await self._call(
            self._stub.ListCredentials, request, cpb.ListCredentialsResponse
        )
        return list(response.credentials)

    async def delete(self, credential_id: str, *, user_id: str | None = None) -> None:
        """Deletes a key for good (CredentialNotFound if it is not the user's)."""
        request = cpb.DeleteCredentialRequest(
            user_id=user_id or self.user_id, credential_id=credential_id
        )
        await self._call(self._stub.DeleteCredential, request, cpb.DeleteCredentialResponse)
