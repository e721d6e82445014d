"""The services as processes, the way an orchestrator runs them: SIGTERM drains them in
order, and a dependency that is not there at start-up ends them with a clear message and
a non-zero status instead of a traceback or an endless wait."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.embedded import free_port
from shared.pb.jobs.v1 import job_pb2
from tests.support.declared import declare_to
from tests.support.processes import WorkerProcess
from tests.support.stack import WORKER_TOKEN, Client, client_env, open_channel, server_env
from tests.support.wait import eventually

S = job_pb2
Health = health_pb2.HealthCheckResponse
EXIT_UNAVAILABLE = 3


class Service:
    """``python -m <module>`` with its stderr and stdout in one file."""

    def __init__(self, log_path: Path, module: str, **env: str) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", module],
            env={
                **os.environ,
                **server_env(),
                **client_env(WORKER_TOKEN),
                "JOBS_METRICS_PORT": "off",
                "JOBS_WORKER_METRICS_PORT": "off",
                **env,
            },
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def wait(self, timeout: float) -> int:
        return await asyncio.to_thread(self.process.wait, timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    started: list[Service] = []

    def spawn(module: str, **env: str) -> Service:
        service = Service(tmp_path / f"{module}-{len(started)}.log", module, **env)
        started.append(service)
        return service

    yield spawn
    for service in started:
        service.close()


async def health_is(target: str, expected: int) -> bool:
    async with open_channel(target) as channel:
        try:
            answer = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1
            )
        except grpc.aio.AioRpcError:
            return False
        return bool(answer.status == expected)


async def test_sigterm_turns_not_serving_then_refuses_rpcs_and_lets_in_flight_ones_finish(
    start: Callable[..., Service], database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    service = start(
        "job_service",
        JOBS_DATABASE_URL=database_url,
        JOBS_NATS_URL=nats_url,
        JOBS_GRPC_PORT=str(port),
        JOBS_SHUTDOWN_DELAY_S="3",
        JOBS_SHUTDOWN_GRACE_S="20",
    )
    await eventually(lambda: health_is(target, Health.SERVING), timeout=30, message="never SERVING")
    await declare_to(target, WORKER_TOKEN)
    async with open_channel(target) as channel:
        client = Client(channel)
        # An RPC in flight: its insert waits on a table lock this test holds.
        blocker = await asyncpg.connect(database_url)
        transaction = blocker.transaction()
        await transaction.start()
        await blocker.execute("LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE")
        in_flight = asyncio.create_task(client.create(sleep_ms=1))
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ),
            message="CreateJob never reached the database",
        )

        service.process.send_signal(signal.SIGTERM)

        await eventually(lambda: health_is(target, Health.NOT_SERVING), message="still SERVING")
        # within the shutdown delay, calls are still answered
        with pytest.raises(grpc.aio.AioRpcError) as not_found:
            await client.get("00000000-0000-0000-0000-000000000000")
        assert not_found.value.code() == grpc.StatusCode.NOT_FOUND

        async def refused() -> bool:
            try:
                await client.get("00000000-0000-0000-0000-000000000000")
            except grpc.aio.AioRpcError as error:
                return error.code() == grpc.StatusCode.UNAVAILABLE
            return False

        await eventually(refused, timeout=10, message="new RPCs still accepted")
        assert not in_flight.done()
        await transaction.commit()
        await blocker.close()
        created = await in_flight

    assert created.created
    assert await service.wait(20) == 0
    assert "Traceback" not in service.output()
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", created.job.id) == "queued"


async def test_a_terminated_worker_fetches_no_new_work(
    client: Client, db: asyncpg.Connection, spawn_worker: Callable[..., WorkerProcess]
) -> None:
    worker = spawn_worker("leaving", JOBS_WORKER_SHUTDOWN_GRACE_S="20")
    first = await client.create(sleep_ms=1500)
    await eventually(
        lambda: db.fetchval("SELECT locked_by FROM jobs WHERE id = $1", first.job.id),
        timeout=15,
        message="never started",
    )

    worker.signal(signal.SIGTERM)
    await eventually(lambda: "shutting down" in worker.log(), message="signal not handled")
    second = await client.create(sleep_ms=1)

    assert await worker.wait(25) == 0
    assert (await client.get(first.job.id)).status == S.JOB_STATUS_SUCCEEDED
    later = await client.get(second.job.id)
    assert (later.status, later.attempt_count) == (S.JOB_STATUS_QUEUED, 0)


def _closed_port_url(scheme: str) -> str:
    return f"{scheme}://127.0.0.1:{free_port()}"


@pytest.mark.parametrize(
    ("module", "missing", "message"),
    [
        ("job_service", "postgres", "PostgreSQL unreachable for 1s"),
        ("job_service", "nats", "NATS unreachable for 1s"),
        ("worker_service", "nats", "NATS unreachable for 1s"),
        ("worker_service", "job_service", "job_service at 127.0.0.1:"),
    ],
)
async def test_an_unreachable_dependency_at_start_up_ends_the_process_clearly(
    start: Callable[..., Service],
    database_url: str,
    nats_url: str,
    module: str,
    missing: str,
    message: str,
) -> None:
    env = {
        "JOBS_STARTUP_TIMEOUT_S": "1",
        "JOBS_DATABASE_URL": database_url,
        "JOBS_NATS_URL": nats_url,
        "JOBS_GRPC_PORT": str(free_port()),
        "JOBS_JOB_SERVICE_TARGET": f"127.0.0.1:{free_port()}",
    }
    if missing == "postgres":
        env["JOBS_DATABASE_URL"] = _closed_port_url("postgresql") + "/jobs"
    elif missing == "nats":
        env["JOBS_NATS_URL"] = _closed_port_url("nats")

    service = start(module, **env)

    assert await service.wait(30) == EXIT_UNAVAILABLE
    output = service.output()
    assert f"{module}: cannot start: " in output
    assert message in output
    assert "Traceback" not in output


async def test_a_metrics_port_in_use_ends_the_process_clearly(
    start: Callable[..., Service],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        service = start(
            "job_service",
            JOBS_DATABASE_URL=_closed_port_url("postgresql") + "/jobs",
            JOBS_METRICS_HOST="127.0.0.1",
            JOBS_METRICS_PORT=str(port),
        )
        assert await service.wait(30) == EXIT_UNAVAILABLE
    output = service.output()
    assert f"job_service: cannot start: cannot serve metrics on 127.0.0.1:{port}" in output
    assert "Traceback" not in output
