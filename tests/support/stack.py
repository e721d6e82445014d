"""The job service in-process against real PostgreSQL and NATS, and helpers to drive it.

Auth lives here, in one place: ``running_job_service`` configures the test tokens below,
``open_channel`` / ``Client`` / ``client_env`` (for child processes) present them. A test
that goes through these helpers runs authenticated without knowing it.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import grpc

from job_service.app import JobServiceApp
from job_service.settings import JobServiceSettings
from shared.grpc_client import ChannelConfig, aio_channel
from shared.output_hash import output_hash
from shared.pb.jobs.v1 import (
    admin_service_pb2_grpc,
    credential_service_pb2_grpc,
    executor_service_pb2_grpc,
    job_pb2,
    job_service_pb2_grpc,
    schedule_service_pb2_grpc,
)
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import Registry
from tests.support.declared import declare
from worker_service.settings import WorkerSettings

# Short leases so that expiry tests take seconds, not minutes.
FAST = {
    "lease_ttl_s": 1.5,
    "heartbeat_interval_s": 0.3,
    "reaper_interval_s": 0.1,
    "outbox_poll_interval_s": 0.2,
    "shutdown_grace_s": 2.0,
    # no pause between NOT_SERVING and refusing RPCs, no metrics endpoint (tests that
    # scrape ask for port 0)
    "shutdown_delay_s": 0.0,
    "metrics_port": None,
}

# The master key users' provider keys are sealed under in tests (32 bytes, base64).
TEST_MASTER_KEY = "dGVzdC1tYXN0ZXIta2V5LTMyLWJ5dGVzLWxvbmchISE="


# The test tokens (at least 16 characters, as the server demands). ALL_ROLES is what the
# shared helpers present, so that one channel serves JobService, AdminService and
# ExecutorService alike; the others are for tests about roles.
CLIENT_TOKEN = "test-token-client-0000"
ADMIN_TOKEN = "test-token-admin-00000"
WORKER_TOKEN = "test-token-worker-0000"
ALL_ROLES_TOKEN = "test-token-all-roles-0"
TOKENS = {
    CLIENT_TOKEN: {"principal": "test-client", "roles": ["client"]},
    ADMIN_TOKEN: {"principal": "test-admin", "roles": ["admin"]},
    WORKER_TOKEN: {"principal": "test-worker", "roles": ["worker"]},
    ALL_ROLES_TOKEN: {"principal": "test-all", "roles": ["client", "admin", "worker"]},
}


def settings(database_url: str, nats_url: str, **overrides: Any) -> JobServiceSettings:
    return JobServiceSettings(
        database_url=database_url,
        nats_url=nats_url,
        grpc_port=0,
        **{
            "auth_tokens": json.dumps(TOKENS),
            **FAST,
            "credentials_master_key": TEST_MASTER_KEY,
            **overrides,
        },
    )


def channel_config(target: str, token: str = ALL_ROLES_TOKEN, **tls: str) -> ChannelConfig:
    """How the tests reach ``target``: with ``token``, and TLS when ``tls`` names files
    (ca_file, client_cert_file, client_key_file)."""
    return ChannelConfig(target=target, token=token, **tls)


def open_channel(target: str, token: str = ALL_ROLES_TOKEN, **tls: str) -> grpc.aio.Channel:
    return aio_channel(channel_config(target, token, **tls))


def worker_settings(nats_url: str, target: str, **overrides: Any) -> WorkerSettings:
    """An in-process worker's settings, with the worker token and no metrics endpoint
    (tests that want one ask for port 0: suites run side by side on one machine)."""
    return WorkerSettings(
        nats_url=nats_url,
        job_service_target=target,
        **{"auth_token": WORKER_TOKEN, "worker_metrics_port": None, **overrides},
    )


def server_env() -> dict[str, str]:
    """Environment for a ``python -m job_service`` child process: the test tokens."""
    return {"JOBS_AUTH_TOKENS": json.dumps(TOKENS)}


def client_env(token: str = WORKER_TOKEN) -> dict[str, str]:
    """Environment for a child process (worker, CLI) that calls the job service."""
    env = {"JOBS_AUTH_TOKEN": token}
    # a suite pointed at a TLS job service passes its CA on
    for name in ("JOBS_TLS_CA_FILE", "JOBS_TLS_CLIENT_CERT_FILE", "JOBS_TLS_CLIENT_KEY_FILE"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


@asynccontextmanager
async def running_job_service(
    database_url: str, nats_url: str, registry: Registry | None = None, **overrides: Any
) -> AsyncIterator[JobServiceApp]:
    """The job service, with ``registry``'s job types (the shipped ones by default)
    declared as a worker would declare them."""
    async with JobServiceApp(settings(database_url, nats_url, **overrides)) as app:
        await declare(app, registry)
        yield app


class Client:
    """Stubs of both services on one channel, with shorthands the tests share."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.jobs = job_service_pb2_grpc.JobServiceStub(channel)
        self.executor = executor_service_pb2_grpc.ExecutorServiceStub(channel)
        self.admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        self.credentials = credential_service_pb2_grpc.CredentialServiceStub(channel)
        self.schedules = schedule_service_pb2_grpc.ScheduleServiceStub(channel)

    async def create(
        self, user_id: str = "user-1", job_type: str = "synthetic", key: str = "", **job_input: Any
    ) -> jpb.CreateJobResponse:
        return await self.jobs.CreateJob(
            jpb.CreateJobRequest(
                user_id=user_id,
                job_type=job_type,
                input=struct_from_dict(job_input),
                idempotency_key=key,
            )
        )

    async def get(self, job_id: str, user_id: str = "user-1") -> Any:
        return (await self.jobs.GetJob(jpb.GetJobRequest(job_id=job_id, user_id=user_id))).job

    async def lock(self, job_id: str, worker_id: str = "worker-a") -> epb.LockJobResponse:
        return await self.executor.LockJob(epb.LockJobRequest(job_id=job_id, worker_id=worker_id))


def result_request(
    job_id: str, token: str, output: dict[str, Any], artifact_payload: dict[str, Any] | None = None
) -> epb.SubmitResultRequest:
    """A SubmitResult as the worker sends it: output, its hash, one artifact."""
    return epb.SubmitResultRequest(
        job_id=job_id,
        lease_token=token,
        output=struct_from_dict(output),
        output_hash=output_hash(output),
        artifacts=[
            job_pb2.Artifact(
                artifact_type="synthetic_result",
                artifact_id=f"syn_{job_id}",
                payload=struct_from_dict(artifact_payload or {"n": 1}),
            )
        ],
    )


async def count_rows(database_url: str) -> dict[str, int]:
    """Row counts of every table a request could write."""
    conn = await asyncpg.connect(database_url)
    try:
        return {
            table: await conn.fetchval(f"SELECT count(*) FROM {table}")
            for table in (
                "jobs",
                "job_snapshots",
                "job_artifacts",
                "job_events",
                "outbox_events",
                "api_secrets",
                "job_quota_usage",
                "credentials",
                "queue_controls",
                "rate_limits",
                "worker_definitions",
                "job_steps",
                "usage_logs",
                "schedules",
                "schedule_runs",
                "job_signals",
                "job_type_specs",
            )
        }
    finally:
        await conn.close()
