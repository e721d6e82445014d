"""CredentialService against real PostgreSQL: keys go in sealed and never come out, each
user sees only their own, and the master keys are checked at start-up and rotated."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import asyncpg
import grpc
import pytest

from job_service.databases import reseal_credentials
from job_service.domain.credentials import key_id, new_master_key, parse_master_key
from job_service.usecases.credentials import MasterKeyMissing
from shared.credentials import fingerprint
from shared.errors import (
    CredentialNotFound,
    CredentialUnavailable,
    IdempotencyKeyReused,
    InvalidInput,
)
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.rpc_errors import error_from_rpc
from tests.support.stack import (
    TEST_MASTER_KEY,
    Client,
    count_rows,
    open_channel,
    running_job_service,
    server_env,
    settings,
)

API_KEY = "sk-integration-7f3a9c1e5b-PUT"


async def put(
    client: Client, user_id: str = "user-1", api_key: str = API_KEY, **fields: str
) -> cpb.Credential:
    request = cpb.PutCredentialRequest(
        user_id=user_id, provider=fields.pop("provider", "deepseek"), api_key=api_key, **fields
    )
    response = await client.credentials.PutCredential(request)
    assert API_KEY.encode() not in response.SerializeToString()
    return response.credential


async def listed(client: Client, user_id: str = "user-1") -> list[cpb.Credential]:
    response = await client.credentials.ListCredentials(cpb.ListCredentialsRequest(user_id=user_id))
    return list(response.credentials)


async def refused(call):  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value


async def test_put_returns_an_id_and_fingerprint_and_stores_only_a_sealed_key(
    client: Client, db: asyncpg.Connection
) -> None:
    credential = await put(client, label="team key")

    assert credential.fingerprint == fingerprint(API_KEY)
    assert (credential.user_id, credential.provider, credential.label) == (
        "user-1",
        "deepseek",
        "team key",
    )
    assert credential.HasField("created_at") and not credential.HasField("last_used_at")
    row = await db.fetchrow("SELECT * FROM credentials WHERE id = $1", credential.id)
    assert row["key_id"] == key_id(parse_master_key(TEST_MASTER_KEY))
    assert API_KEY.encode() not in row["ciphertext"] and len(row["nonce"]) == 12
    assert API_KEY not in str(dict(row))


async def test_list_shows_the_users_own_credentials_newest_first(client: Client) -> None:
    older = await put(client, provider="openai")
    newer = await put(client, api_key=API_KEY + "-2")
    await put(client, user_id="user-2")

    mine = await listed(client)

    assert [c.id for c in mine] == [newer.id, older.id]
    assert [c.fingerprint for c in mine] == [fingerprint(API_KEY + "-2"), fingerprint(API_KEY)]
    assert [c.provider for c in mine] == ["deepseek", "openai"]
    assert await listed(client, "nobody") == []


async def test_delete_removes_only_the_owners_credential(
    client: Client, db: asyncpg.Connection
) -> None:
    credential = await put(client)
    delete = cpb.DeleteCredentialRequest

    stranger = await refused(
        client.credentials.DeleteCredential(delete(user_id="user-2", credential_id=credential.id))
    )
    assert stranger.code() == grpc.StatusCode.NOT_FOUND
    assert isinstance(error_from_rpc(stranger), CredentialNotFound)
    assert await db.fetchval("SELECT count(*) FROM credentials") == 1

    await client.credentials.DeleteCredential(delete(user_id="user-1", credential_id=credential.id))

    assert await db.fetchval("SELECT count(*) FROM credentials") == 0
    assert await listed(client) == []
    again = await refused(
        client.credentials.DeleteCredential(delete(user_id="user-1", credential_id=credential.id))
    )
    assert again.code() == grpc.StatusCode.NOT_FOUND


async def test_a_put_with_an_idempotency_key_stores_once_and_refuses_another_request(
    client: Client, db: asyncpg.Connection
) -> None:
    first, again = await asyncio.gather(
        put(client, idempotency_key="rotate-2026-12"), put(client, idempotency_key="rotate-2026-12")
    )
    assert first.id == again.id
    assert (await put(client, idempotency_key="rotate-2026-12")).id == first.id
    assert await db.fetchval("SELECT count(*) FROM credentials") == 1

    for other in ({"api_key": API_KEY + "-other"}, {"label": "renamed"}, {"provider": "openai"}):
        reused = await refused(put(client, idempotency_key="rotate-2026-12", **other))
        assert reused.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert isinstance(error_from_rpc(reused), IdempotencyKeyReused)
        assert API_KEY not in (reused.details() or "")
    assert await db.fetchval("SELECT count(*) FROM credentials") == 1
    # keys are per user; a deleted credential frees its key
    assert (await put(client, user_id="user-2", idempotency_key="rotate-2026-12")).id != first.id
    await client.credentials.DeleteCredential(
        cpb.DeleteCredentialRequest(user_id="user-1", credential_id=first.id)
    )
    assert (await put(client, idempotency_key="rotate-2026-12")).id != first.id
    stored = await db.fetchval("SELECT request_hash FROM credentials WHERE user_id = 'user-1'")
    assert API_KEY not in stored and fingerprint(API_KEY).removeprefix("sha256:") not in stored


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"idempotency_key": "k\n"}, "idempotency_key"),
        ({"idempotency_key": "k" * 256}, "idempotency_key"),
        ({"user_id": ""}, "user_id"),
        ({"provider": ""}, "provider"),
        ({"provider": "Deep Seek"}, "provider"),
        ({"api_key": ""}, "api_key"),
        ({"api_key": f"{API_KEY} with a space"}, "api_key"),
        ({"api_key": f"{API_KEY}\n"}, "api_key"),
        ({"api_key": API_KEY + "x" * 5000}, "api_key"),
        ({"label": "l" * 201}, "label"),
    ],
)
async def test_bad_put_input_is_refused_naming_the_field_never_quoting_the_key(
    client: Client, database_url: str, fields: dict[str, str], field: str
) -> None:
    before = await count_rows(database_url)
    request = {"user_id": "user-1", "provider": "deepseek", "api_key": API_KEY, **fields}

    error = await refused(client.credentials.PutCredential(cpb.PutCredentialRequest(**request)))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    translated = error_from_rpc(error)
    assert isinstance(translated, InvalidInput)
    assert [v.field for v in translated.violations] == [field]
    assert API_KEY not in str(error) and API_KEY not in repr(translated.violations)
    assert await count_rows(database_url) == before


async def test_without_a_master_key_keys_are_refused_not_stored(
    database_url: str, nats_url: str
) -> None:
    async with (
        running_job_service(database_url, nats_url, credentials_master_key=None) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        error = await refused(
            Client(channel).credentials.PutCredential(
                cpb.PutCredentialRequest(user_id="u", provider="deepseek", api_key=API_KEY)
            )
        )

    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert isinstance(error_from_rpc(error), CredentialUnavailable)
    assert (await count_rows(database_url))["credentials"] == 0


async def test_start_up_refuses_when_stored_keys_cannot_be_opened(
    database_url: str, nats_url: str
) -> None:
    async with (
        running_job_service(database_url, nats_url) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await put(Client(channel))
    stored_under = key_id(parse_master_key(TEST_MASTER_KEY))

    for missing in (None, new_master_key()):
        with pytest.raises(MasterKeyMissing, match=stored_under) as raised:
            async with running_job_service(database_url, nats_url, credentials_master_key=missing):
                pass
        assert TEST_MASTER_KEY not in str(raised.value)
    # the old key as a retired one is enough
    async with running_job_service(
        database_url,
        nats_url,
        credentials_master_key=new_master_key(),
        credentials_retired_master_keys=TEST_MASTER_KEY,
    ):
        pass


async def test_rotation_reseals_every_key_under_the_new_master_key(
    client: Client, database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    for n in range(3):
        await put(client, user_id=f"user-{n}", api_key=f"{API_KEY}-{n}")
    new = new_master_key()
    rotated = settings(
        database_url,
        nats_url,
        credentials_master_key=new,
        credentials_retired_master_keys=TEST_MASTER_KEY,
    )

    # python -m job_service reseal-credentials
    assert await reseal_credentials(rotated) == 3
    assert await reseal_credentials(rotated) == 0

    assert await db.fetchval("SELECT array_agg(DISTINCT key_id) FROM credentials") == [
        key_id(parse_master_key(new))
    ]
    # the retired key is no longer needed: the service starts with the new one alone
    async with running_job_service(database_url, nats_url, credentials_master_key=new):
        pass


@pytest.mark.slow
async def test_serve_without_the_master_key_exits_with_one_sentence(
    client: Client, database_url: str, nats_url: str
) -> None:
    await put(client)
    env = {
        **os.environ,
        **server_env(),
        "JOBS_DATABASE_URL": database_url,
        "JOBS_NATS_URL": nats_url,
    }
    env.pop("JOBS_CREDENTIALS_MASTER_KEY", None)

    run = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "job_service", "serve"],
        env={**env, "JOBS_GRPC_PORT": "0", "JOBS_METRICS_PORT": "off"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("job_service: user credentials are")
    assert "JOBS_CREDENTIALS_MASTER_KEY" in run.stderr and "Traceback" not in run.stderr
