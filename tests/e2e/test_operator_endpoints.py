"""What an orchestrator and an operator rely on beyond the jobs themselves: per-RPC metrics
and build_info on job_service, the worker's /livez and /readyz, and a job_service that
refuses to serve a schema behind its migrations (the release's migration Job did not run).
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path

import asyncpg
import grpc
import pytest

from job_service.adapters.grpc.rpc_metrics import split_method
from job_service.adapters.postgres.schema_version import migration_heads
from job_service.app import JobServiceApp
from shared.startup import StartupError
from tests.support.metrics import metrics_port_in, scrape, value
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.stack import settings as stack_settings
from tests.support.wait import eventually

JOB_SERVICE = "jobs.v1.JobService"


def test_a_method_name_splits_into_service_and_method() -> None:
    assert split_method("/jobs.v1.JobService/CreateJob") == (JOB_SERVICE, "CreateJob")
    assert split_method("nonsense") == ("unknown", "nonsense")


async def test_rpcs_are_counted_by_method_and_code_and_build_info_is_served(
    database_url: str, nats_url: str
) -> None:
    async with (
        running_job_service(database_url, nats_url, metrics_port=0) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        assert app.metrics.port
        client = Client(channel)
        before = await scrape(app.metrics.port)
        created = await client.create(sleep_ms=0)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.get("00000000-0000-0000-0000-000000000000")
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        assert created.job.id
        after = await scrape(app.metrics.port)

        def moved(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        create = {"grpc_service": JOB_SERVICE, "grpc_method": "CreateJob"}
        get = {"grpc_service": JOB_SERVICE, "grpc_method": "GetJob"}
        assert moved("jobs_grpc_server_started_total", **create, grpc_type="unary") == 1
        assert moved("jobs_grpc_server_handled_total", **create, grpc_type="unary", grpc_code="OK")
        assert (
            moved("jobs_grpc_server_handled_total", **get, grpc_type="unary", grpc_code="NOT_FOUND")
            == 1
        )
        assert moved("jobs_grpc_server_handling_seconds_count", **create) == 1
        builds = [k for k in after if k[0] == "jobs_build_info"]
        assert any(dict(labels)["service"] == "job_service" for _, labels in builds)


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


async def test_the_worker_serves_liveness_and_readiness_beside_its_metrics(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    async with running_job_service(database_url, nats_url) as app:
        worker = WorkerProcess(
            tmp_path, "probed", nats_url, f"127.0.0.1:{app.port}", JOBS_WORKER_METRICS_PORT="0"
        )
        try:
            port = await eventually(
                lambda: metrics_port_in(worker.log()), timeout=20, message="no worker metrics"
            )

            async def ready() -> bool:
                return await asyncio.to_thread(_status, port, "/readyz") == 200

            await eventually(ready, timeout=10, message="worker never ready")
            assert await asyncio.to_thread(_status, port, "/livez") == 200
            samples = await scrape(port)
            builds = [k for k in samples if k[0] == "jobs_build_info"]
            assert [dict(labels)["service"] for _, labels in builds] == ["worker_service"]
        finally:
            worker.close()


async def _set_schema_revision(database_url: str, revision: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("UPDATE alembic_version SET version_num = $1", revision)
    finally:
        await conn.close()


async def test_job_service_refuses_a_schema_behind_its_migrations(
    database_url: str, nats_url: str
) -> None:
    [head] = migration_heads()[0]
    await _set_schema_revision(database_url, "0001")
    app = JobServiceApp(stack_settings(database_url, nats_url))
    with pytest.raises(StartupError, match=rf"schema is at 0001, this release needs {head}"):
        await app.start()
    await app.stop()


async def test_job_service_serves_a_schema_ahead_of_it_during_a_rollout(
    database_url: str, nats_url: str
) -> None:
    await _set_schema_revision(database_url, "9999_from_the_next_release")
    async with (
        running_job_service(database_url, nats_url) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        assert (await Client(channel).create(sleep_ms=0)).job.id
