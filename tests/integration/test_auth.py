"""Auth: bearer tokens → principal and roles, checked per service by one interceptor;
health and reflection open; TLS and mutual TLS when configured."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from job_service.adapters.grpc.auth import SERVICE_ROLES, AuthConfigError, Role, TokenTable
from job_service.app import JobServiceApp
from shared.grpc_client import ClientConfigError
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from tests.support.certs import make_certs
from tests.support.stack import (
    ADMIN_TOKEN,
    CLIENT_TOKEN,
    WORKER_TOKEN,
    Client,
    open_channel,
    running_job_service,
    settings,
)

UNKNOWN_JOB = "00000000-0000-4000-8000-000000000000"


def _reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)
    assert status is not None
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            infos.append(info.reason)
    assert len(infos) == 1
    return infos[0]


async def _calls(client: Client) -> dict[str, object]:
    """One harmless call per service; each returns the awaitable of its answer."""
    return {
        "jobs.v1.JobService": client.jobs.GetJob(
            jpb.GetJobRequest(job_id=UNKNOWN_JOB, user_id="u1")
        ),
        "jobs.v1.AdminService": client.admin.ListJobDefinitions(apb.ListJobDefinitionsRequest()),
        "jobs.v1.ExecutorService": client.executor.Heartbeat(
            epb.HeartbeatRequest(job_id=UNKNOWN_JOB, lease_token=UNKNOWN_JOB)
        ),
        "jobs.v1.ScheduleService": client.schedules.GetSchedule(
            spb.GetScheduleRequest(schedule_id=UNKNOWN_JOB, user_id="u1")
        ),
    }


# token → the services it may reach (the others answer PERMISSION_DENIED)
ALLOWED = {
    CLIENT_TOKEN: {"jobs.v1.JobService", "jobs.v1.ScheduleService"},
    ADMIN_TOKEN: {"jobs.v1.JobService", "jobs.v1.AdminService", "jobs.v1.ScheduleService"},
    WORKER_TOKEN: {"jobs.v1.ExecutorService"},
}


@pytest.mark.parametrize("token", list(ALLOWED), ids=["client", "admin", "worker"])
async def test_each_role_reaches_its_services_and_only_those(target: str, token: str) -> None:
    async with open_channel(target, token) as channel:
        for service, call in (await _calls(Client(channel))).items():
            try:
                await call  # type: ignore[misc]
                outcome = "ok"
            except grpc.aio.AioRpcError as error:
                outcome = _reason(error)
            if service in ALLOWED[token]:
                # past the check: an answer, or the service's own refusal of the dummy id
                assert outcome in {"ok", "JOB_NOT_FOUND", "LEASE_LOST", "SCHEDULE_NOT_FOUND"}, (
                    service
                )
            else:
                assert outcome == "PERMISSION_DENIED", service


@pytest.mark.parametrize("token", [CLIENT_TOKEN, WORKER_TOKEN], ids=["client", "worker"])
async def test_bulk_cancel_and_retry_are_for_admins_only(
    client: Client, target: str, token: str
) -> None:
    job = (await client.create(user_id="u1")).job  # a queued job both would act on
    async with open_channel(target, token) as channel:
        other = Client(channel)
        selection = apb.JobSelection(job_ids=[job.id])
        for call in (
            other.admin.CancelJobs(apb.CancelJobsRequest(selection=selection)),
            other.admin.RetryJobs(apb.RetryJobsRequest(selection=selection)),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await call
            assert _reason(raised.value) == "PERMISSION_DENIED"
    assert (await client.get(job.id, user_id="u1")).status == job.status
    async with open_channel(target, ADMIN_TOKEN) as channel:
        admin = Client(channel).admin
        answer = await admin.CancelJobs(apb.CancelJobsRequest(selection=selection))
    assert list(answer.job_ids) == [job.id]


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        (("authorization", "Bearer not-a-known-token-at-all"),),
        (("authorization", f"Basic {CLIENT_TOKEN}"),),
        (("authorization", CLIENT_TOKEN),),
        (("authorization", "Bearer "),),
        (("x-api-key", CLIENT_TOKEN),),
    ],
    ids=["none", "unknown", "basic", "no-scheme", "empty", "other-header"],
)
async def test_calls_without_a_valid_bearer_token_are_unauthenticated(
    target: str, metadata: tuple[tuple[str, str], ...]
) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        client = Client(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client.jobs.GetJob(
                jpb.GetJobRequest(job_id=UNKNOWN_JOB, user_id="u1"), metadata=metadata
            )
        assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert _reason(raised.value) == "UNAUTHENTICATED"
        # the stream is refused the same way
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            async for _ in client.jobs.WatchJob(
                jpb.WatchJobRequest(job_id=UNKNOWN_JOB, user_id="u1"), metadata=metadata
            ):
                pass
        assert streamed.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_the_scheme_is_case_insensitive(target: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        answer = await Client(channel).admin.ListJobDefinitions(
            apb.ListJobDefinitionsRequest(), metadata=(("authorization", f"bearer {ADMIN_TOKEN}"),)
        )
    assert "synthetic" in [d.job_type for d in answer.definitions]


async def test_health_and_reflection_need_no_token(target: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_every_service_the_server_offers_has_roles() -> None:
    from job_service.app import SERVICE_NAMES

    assert set(SERVICE_NAMES) <= set(SERVICE_ROLES)
    assert SERVICE_ROLES["jobs.v1.ExecutorService"] == {Role.WORKER}
    assert SERVICE_ROLES["jobs.v1.AdminService"] == {Role.ADMIN, Role.OPERATOR}


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"short": {"principal": "p", "roles": ["client"]}}', "16 printable"),
        ('{"a-long-enough-token": {"roles": ["client"]}}', "principal"),
        ('{"a-long-enough-token": {"principal": "p", "roles": []}}', "roles"),
        ('{"a-long-enough-token": {"principal": "p", "roles": ["root"]}}', "roles"),
        ('{"a-long-enough-token": {"principal": "p", "roles": ["client"], "users": []}}', "users"),
        (
            '{"a-long-enough-token": {"principal": "p", "roles": ["client"], "users": "u1"}}',
            "users",
        ),
        (
            '{"a-long-enough-token": {"principal": "p", "roles": ["client"], '
            '"users": {"prefix": ""}}}',
            "prefix",
        ),
        (
            '{"a-long-enough-token": {"principal": "p", "roles": ["client"], "job_types": [1]}}',
            "job_types",
        ),
        (
            '{"a-long-enough-token": {"principal": "p", "roles": ["admin"], "users": ["u1"]}}',
            "client token only",
        ),
    ],
)
def test_malformed_token_tables_are_refused_without_quoting_tokens(
    text: str, complaint: str
) -> None:
    with pytest.raises(AuthConfigError) as raised:
        TokenTable.parse(text, "JOBS_AUTH_TOKENS")
    assert complaint in str(raised.value)
    assert "a-long-enough-token" not in str(raised.value)


def test_tokens_come_from_a_file_too(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"a-long-enough-token": {"principal": "p", "roles": ["admin"]}}))
    table = TokenTable.from_settings(
        settings("postgresql://x@y/z", "nats://n", auth_tokens="", auth_tokens_file=str(path))
    )
    principal = table.principal("a-long-enough-token")
    assert principal is not None
    assert principal.roles == {Role.ADMIN}
    assert table.principal("another-token-entirely") is None


def test_a_production_start_without_tokens_refuses_to_run() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_AUTH")}
    env["JOBS_DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/none"
    finished = subprocess.run(
        [sys.executable, "-m", "job_service", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 2
    assert "refusing to start" in finished.stderr
    assert "JOBS_AUTH_TOKENS" in finished.stderr


async def test_an_app_without_tokens_does_not_start(database_url: str, nats_url: str) -> None:
    with pytest.raises(AuthConfigError):
        async with JobServiceApp(settings(database_url, nats_url, auth_tokens="")):
            pass


# --- TLS -------------------------------------------------------------------------------


async def test_tls_and_mutual_tls(database_url: str, nats_url: str, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    tls = {
        "tls_cert_file": str(certs.server_cert),
        "tls_key_file": str(certs.server_key),
    }
    async with running_job_service(database_url, nats_url, **tls) as app:
        target = f"127.0.0.1:{app.port}"
        async with open_channel(target, ca_file=str(certs.ca)) as channel:
            created = await Client(channel).create()
        assert created.created
        # a client that does not trust the server's CA gets nowhere
        async with open_channel(target, ca_file=str(certs.other_ca)) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await Client(channel).get(created.job.id, user_id="user-1")
        assert raised.value.code() is grpc.StatusCode.UNAVAILABLE

    mutual = {**tls, "tls_client_ca_file": str(certs.ca)}
    async with running_job_service(database_url, nats_url, **mutual) as app:
        target = f"127.0.0.1:{app.port}"
        with_cert = {
            "ca_file": str(certs.ca),
            "client_cert_file": str(certs.client_cert),
            "client_key_file": str(certs.client_key),
        }
        async with open_channel(target, **with_cert) as channel:
            job = await Client(channel).get(created.job.id)
        assert job.id == created.job.id
        # without a client certificate the handshake fails
        async with open_channel(target, ca_file=str(certs.ca)) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await Client(channel).get(created.job.id)
        assert raised.value.code() is grpc.StatusCode.UNAVAILABLE


def test_client_tls_settings_must_be_complete(tmp_path: Path) -> None:
    from shared.grpc_client import ChannelConfig

    with pytest.raises(ClientConfigError, match="together"):
        ChannelConfig("t", ca_file="ca.pem", client_cert_file="c.pem").credentials()
    with pytest.raises(ClientConfigError, match="JOBS_TLS_CA_FILE"):
        ChannelConfig("t", ca_file=str(tmp_path / "missing.pem")).credentials()
    config = ChannelConfig.from_env(
        "host:1", {"JOBS_AUTH_TOKEN": " tok ", "JOBS_TLS_CA_FILE": "ca.pem"}
    )
    assert config.token == "tok"
    assert config.tls
    assert config.metadata() == (("authorization", "Bearer tok"),)


async def test_the_blocking_channel_carries_the_token_too(target: str) -> None:
    """What command-line tools use (shared.grpc_client.sync_channel), unary and stream."""
    from shared.grpc_client import ChannelConfig, sync_channel
    from shared.pb.jobs.v1 import admin_service_pb2_grpc, job_service_pb2_grpc

    def call() -> tuple[list[str], int]:
        channel = sync_channel(ChannelConfig(target, token=ADMIN_TOKEN))
        try:
            admin = admin_service_pb2_grpc.AdminServiceStub(channel)
            jobs = job_service_pb2_grpc.JobServiceStub(channel)
            definitions = admin.ListJobDefinitions(apb.ListJobDefinitionsRequest())
            created = jobs.CreateJob(jpb.CreateJobRequest(user_id="u1", job_type="synthetic"))
            jobs.CancelJob(jpb.CancelJobRequest(job_id=created.job.id, user_id="u1"))
            watched = list(jobs.WatchJob(jpb.WatchJobRequest(job_id=created.job.id, user_id="u1")))
            return [d.job_type for d in definitions.definitions], len(watched)
        finally:
            channel.close()

    types, answers = await asyncio.to_thread(call)
    assert "synthetic" in types
    assert answers == 1
