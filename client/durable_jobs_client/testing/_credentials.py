"""``FakeCredentialsClient``: ``AsyncCredentialsClient``'s methods over a
``JobServiceState``: a key goes in, only its fingerprint comes back."""

from __future__ import annotations

import hashlib
import uuid

from durable_jobs_client._pb.jobs.v1 import credential_service_pb2 as cpb
from durable_jobs_client.errors import CredentialNotFound, InvalidInput
from durable_jobs_client.testing._service import JobServiceState, now_stamp, refusal

Credential = cpb.Credential


class FakeCredentialsClient:
    """CredentialService in memory, acting for ``user_id`` unless a call names another."""

    def __init__(self, service: JobServiceState, user_id: str) -> None:
        self.service = service
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
        answer = await self.service.called("credentials.put", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        if not provider or not api_key:
            raise refusal(InvalidInput, "provider and api_key are required")
        owner = user_id or self.user_id

        def store() -> Credential:
            digest = hashlib.sha256(api_key.encode()).hexdigest()
            stored = Credential(
                id=str(uuid.uuid4()),
                user_id=owner,
                provider=provider,
                label=label,
                fingerprint=f"sha256:{digest[:12]}",
            )
            now_stamp(stored.created_at)
            self.service.credentials.append(stored)
            return stored

        if not idempotency_key:
            return store()
        stored, _ = self.service.once(("credential", owner, idempotency_key), store)
        return stored  # type: ignore[no-any-return]

    async def list(self, *, user_id: str | None = None) -> list[Credential]:
        """The user's credentials, newest first."""
        answer = await self.service.called("credentials.list", locals())
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        owner = user_id or self.user_id
        return [c for c in reversed(self.service.credentials) if c.user_id == owner]

    async def delete(self, credential_id: str, *, user_id: str | None = None) -> None:
        await self.service.called("credentials.delete", locals())
        owner = user_id or self.user_id
        kept = [c for c in self.service.credentials if (c.id, c.user_id) != (credential_id, owner)]
        if len(kept) == len(self.service.credentials):
            raise refusal(CredentialNotFound, "no such credential")
        self.service.credentials = kept
