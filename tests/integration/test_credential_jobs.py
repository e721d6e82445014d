"""Jobs on a user's own key, against real PostgreSQL and NATS: CreateJob accepts only the
user's own credential for a job type that allows it (writing nothing otherwise), the job
holds only the id, and ResolveCredential answers the holder of the current lease alone."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from jobtypes import synthetic
from shared.credentials import CredentialMode
from shared.errors import (
    CredentialNotFound,
    CredentialUnavailable,
    IdempotencyKeyReused,
    InvalidInput,
    LeaseLost,
)
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import Registry
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client, count_rows, open_channel, running_job_service

API_KEY = "sk-integration-41d0c8e2aa-RESOLVE"
USER = job_pb2.CREDENTIAL_MODE_USER
PLATFORM = job_pb2.CREDENTIAL_MODE_PLATFORM


async def put(client: Client, user_id: str = "user-1", api_key: str = API_KEY) -> str:
    response = await client.credentials.PutCredential(
        cpb.PutCredentialRequest(user_id=user_id, provider="deepseek", api_key=api_key)
    )
    return response.credential.id


async def create(
    client: Client,
    credential_id: str = "",
    mode: int = USER,
    user_id: str = "user-1",
    job_type: str = "synthetic",
    key: str = "",
    **job_input: Any,
) -> jpb.CreateJobResponse:
    return await client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id=user_id,
            job_type=job_type,
            input=struct_from_dict(job_input),
            idempotency_key=key,
            credential_mode=mode,  # type: ignore[arg-type]
            credential_id=credential_id,
        )
    )


async def resolve(client: Client, job_id: str, token: str) -> epb.ResolveCredentialResponse:
    return await client.executor.ResolveCredential(
        epb.ResolveCredentialRequest(job_id=job_id, lease_token=token)
    )


async def refused(call):  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    assert API_KEY not in str(raised.value)
    return raised.value.code(), error_from_rpc(raised.value)


# --- CreateJob ---------------------------------------------------------------------------


async def test_a_job_on_a_user_key_holds_only_the_credentials_id(
    client: Client, db: asyncpg.Connection
) -> None:
    credential_id = await put(client)

    job = (await create(client, credential_id)).job

    assert (job.credential_mode, job.credential_id) == (USER, credential_id)
    assert (await client.get(job.id)).credential_id == credential_id
    row = await db.fetchrow(
        "SELECT credential_mode, credential_id::text FROM jobs WHERE id = $1", job.id
    )
    assert tuple(row) == ("user", credential_id)
    outbox = await db.fetchval("SELECT payload FROM outbox_events WHERE aggregate_id = $1", job.id)
    assert json.loads(outbox) == {"job_id": job.id, "attempt": 1}  # ids of the job only


async def test_platform_is_the_default_and_can_be_named(client: Client) -> None:
    unspecified = (await create(client, mode=job_pb2.CREDENTIAL_MODE_UNSPECIFIED)).job
    named = (await create(client, mode=PLATFORM)).job

    assert unspecified.credential_mode == named.credential_mode == PLATFORM
    assert unspecified.credential_id == named.credential_id == ""


@pytest.mark.parametrize(
    ("mode", "credential", "field"),
    [
        (USER, "", "credential_id"),
        (USER, "not-a-uuid", "credential_id"),
        (USER, "unknown", "credential_id"),  # a well-formed id nobody owns
        (USER, "strangers", "credential_id"),  # another user's
        (PLATFORM, "mine", "credential_id"),
        (job_pb2.CREDENTIAL_MODE_UNSPECIFIED, "mine", "credential_id"),
        (7, "mine", "credential_mode"),
    ],
)
async def test_bad_credential_choices_are_refused_naming_the_field_and_write_nothing(
    client: Client, database_url: str, mode: int, credential: str, field: str
) -> None:
    ids = {
        "mine": await put(client),
        "strangers": await put(client, user_id="user-2"),
        "unknown": str(uuid.uuid4()),
    }
    before = await count_rows(database_url)

    code, error = await refused(create(client, ids.get(credential, credential), mode))

    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(error, InvalidInput)
    assert [v.field for v in error.violations] == [field]
    assert await count_rows(database_url) == before


async def test_a_job_type_allows_user_keys_only_when_its_definition_says_so(
    database_url: str, nats_url: str
) -> None:
    platform_only = dataclasses.replace(
        synthetic.DEFINITION,
        job_type="platform_only",
        credential_modes=(CredentialMode.PLATFORM,),
    )
    registry = Registry([synthetic.DEFINITION, platform_only])
    async with (
        running_job_service(database_url, nats_url, registry) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        client = Client(channel)
        credential_id = await put(client)
        before = await count_rows(database_url)

        code, error = await refused(create(client, credential_id, job_type="platform_only"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in error.violations] == ["credential_mode"]
        assert await count_rows(database_url) == before
        assert (await create(client, credential_id)).job.credential_id == credential_id
        assert (await create(client, mode=PLATFORM, job_type="platform_only")).created


async def test_an_idempotency_key_reused_with_another_credential_is_refused(
    client: Client,
) -> None:
    first, second = await put(client), await put(client, api_key=API_KEY + "-2")
    original = (await create(client, first, key="order-1")).job

    again = await create(client, first, key="order-1")
    assert (again.created, again.job.id) == (False, original.id)
    for other in (
        create(client, second, key="order-1"),
        create(client, "", PLATFORM, key="order-1"),
    ):
        code, error = await refused(other)
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        assert isinstance(error, IdempotencyKeyReused)


async def test_a_credential_id_spelled_in_upper_case_is_the_same_credential(
    client: Client,
) -> None:
    credential_id = await put(client)

    first = await create(client, credential_id.upper(), key="order-2")
    again = await create(client, credential_id, key="order-2")

    assert first.job.credential_id == credential_id
    assert (again.created, again.job.id) == (False, first.job.id)


# --- ResolveCredential --------------------------------------------------------------------


async def test_the_lease_holder_gets_the_key_and_it_is_marked_used(client: Client) -> None:
    credential_id = await put(client)
    job = (await create(client, credential_id)).job

    locked = (await client.lock(job.id)).job
    resolved = await resolve(client, job.id, locked.lease_token)

    assert (locked.credential_mode, locked.credential_id) == (USER, credential_id)
    assert (resolved.api_key, resolved.provider, resolved.credential_id) == (
        API_KEY,
        "deepseek",
        credential_id,
    )
    listed = await client.credentials.ListCredentials(cpb.ListCredentialsRequest(user_id="user-1"))
    assert listed.credentials[0].HasField("last_used_at")


async def test_only_the_current_lease_resolves(client: Client, db: asyncpg.Connection) -> None:
    job = (await create(client, await put(client))).job
    first = (await client.lock(job.id)).job
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id, lease_token=first.lease_token, error_code="WORKER_SHUTDOWN"
        )
    )

    before_relock = await refused(resolve(client, job.id, first.lease_token))
    second = (await client.lock(job.id, "worker-b")).job
    stale = await refused(resolve(client, job.id, first.lease_token))
    forged = await refused(resolve(client, job.id, str(uuid.uuid4())))

    for code, error in (before_relock, stale, forged):
        assert code == grpc.StatusCode.ABORTED
        assert isinstance(error, LeaseLost)
    assert (await resolve(client, job.id, second.lease_token)).api_key == API_KEY
    # an expired lease is not current either, reaped or not
    await db.execute("UPDATE jobs SET lock_until = now() - interval '1 second'")
    code, error = await refused(resolve(client, job.id, second.lease_token))
    assert (code, type(error)) == (grpc.StatusCode.ABORTED, LeaseLost)


async def test_a_finished_job_no_longer_resolves(client: Client) -> None:
    job = (await create(client, await put(client))).job
    lease = (await client.lock(job.id)).job
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id, lease_token=lease.lease_token, error_code="JOB_REJECTED"
        )
    )

    code, error = await refused(resolve(client, job.id, lease.lease_token))

    assert (code, type(error)) == (grpc.StatusCode.ABORTED, LeaseLost)


async def test_a_platform_job_has_no_user_key_to_resolve(client: Client) -> None:
    job = (await create(client, mode=PLATFORM)).job
    lease = (await client.lock(job.id)).job

    code, error = await refused(resolve(client, job.id, lease.lease_token))

    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert isinstance(error, CredentialUnavailable)


async def test_a_credential_deleted_after_create_is_not_found_when_resolved(
    client: Client,
) -> None:
    credential_id = await put(client)
    job = (await create(client, credential_id)).job
    await client.credentials.DeleteCredential(
        cpb.DeleteCredentialRequest(user_id="user-1", credential_id=credential_id)
    )
    lease = (await client.lock(job.id)).job

    code, error = await refused(resolve(client, job.id, lease.lease_token))

    assert code == grpc.StatusCode.NOT_FOUND
    assert isinstance(error, CredentialNotFound)


async def test_a_ciphertext_moved_to_another_users_row_does_not_decrypt(
    client: Client, db: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    victim = await put(client, "user-1")
    attacker = await put(client, "user-2", api_key="sk-attacker-own-key")
    # someone with write access to the table copies the victim's sealed key into their row
    await db.execute(
        "UPDATE credentials SET (key_id, nonce, ciphertext) ="
        " (SELECT key_id, nonce, ciphertext FROM credentials WHERE id = $1) WHERE id = $2",
        victim,
        attacker,
    )
    job = (await create(client, attacker, user_id="user-2")).job
    lease = (await client.lock(job.id)).job

    code, error = await refused(resolve(client, job.id, lease.lease_token))

    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert isinstance(error, CredentialUnavailable)
    assert API_KEY not in caplog.text
    assert attacker in caplog.text  # operators learn which credential is broken


async def test_the_database_refuses_a_mode_and_id_that_disagree(
    client: Client, db: asyncpg.Connection
) -> None:
    job = (await create(client, mode=PLATFORM)).job

    for mode, credential_id in (("user", None), ("platform", str(uuid.uuid4())), ("other", None)):
        with pytest.raises(asyncpg.CheckViolationError):
            await db.execute(
                "UPDATE jobs SET credential_mode = $2, credential_id = $3 WHERE id = $1",
                job.id,
                mode,
                credential_id,
            )
