"""CredentialService: users' own provider keys. A key goes in and never comes out; errors
are raised and translated by the ErrorInterceptor."""

from __future__ import annotations

import grpc

from job_service.domain.credentials import CredentialRecord
from job_service.usecases.credentials import CredentialVault
from shared.pb.jobs.v1 import credential_service_pb2 as pb
from shared.pb.jobs.v1 import credential_service_pb2_grpc
from shared.pbconv import timestamp


class CredentialServicer(credential_service_pb2_grpc.CredentialServiceServicer):
    def __init__(self, vault: CredentialVault) -> None:
        self._vault = vault

    async def PutCredential(
        self, request: pb.PutCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.PutCredentialResponse:
        record = await self._vault.put(
            request.user_id,
            request.provider,
            request.api_key,
            request.label,
            idempotency_key=request.idempotency_key,
        )
        return pb.PutCredentialResponse(credential=credential_to_pb(record))

    async def ListCredentials(
        self, request: pb.ListCredentialsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCredentialsResponse:
        records = await self._vault.list_for(request.user_id)
        return pb.ListCredentialsResponse(credentials=[credential_to_pb(r) for r in records])

    async def DeleteCredential(
        self, request: pb.DeleteCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteCredentialResponse:
        await self._vault.delete(request.user_id, request.credential_id)
        return pb.DeleteCredentialResponse()


def credential_to_pb(record: CredentialRecord) -> pb.Credential:
    return pb.Credential(
        id=record.id,
        user_id=record.user_id,
        provider=record.provider,
        label=record.label,
        fingerprint=record.fingerprint,
        created_at=timestamp(record.created_at),
        last_used_at=timestamp(record.last_used_at),
    )
