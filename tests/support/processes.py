"""The services as separate OS processes, for the tests that kill, pause or terminate them.

Every process environment is built here (``job_service_env``, ``worker_env``), and the
harness's own client settings too (``client_config``), so that settings every process and
client needs (tokens, TLS files) are added in one place.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from shared.grpc_client import ChannelConfig
from tests.support.stack import WORKER_TOKEN, channel_config, client_env, server_env


def job_service_env(
    database_url: str, nats_url: str, port: int, instance_id: str, **env: str
) -> dict[str, str]:
    """The environment of ``python -m job_service serve`` listening on 127.0.0.1:``port``."""
    return {
        **os.environ,
        "JOBS_DATABASE_URL": database_url,
        "JOBS_NATS_URL": nats_url,
        "JOBS_GRPC_HOST": "127.0.0.1",
        "JOBS_GRPC_PORT": str(port),
        "JOBS_INSTANCE_ID": instance_id,
        **server_env(),
        # off unless a test asks (many processes run at once)
        "JOBS_METRICS_PORT": "off",
        **env,
    }


def worker_env(nats_url: str, target: str, worker_id: str, **env: str) -> dict[str, str]:
    """The environment of ``python -m worker_service`` talking to job_service at ``target``."""
    return {
        **os.environ,
        "JOBS_NATS_URL": nats_url,
        "JOBS_JOB_SERVICE_TARGET": target,
        "JOBS_WORKER_ID": worker_id,
        **client_env(WORKER_TOKEN),
        # off unless a test asks (port 0: many workers run at once)
        "JOBS_WORKER_METRICS_PORT": "off",
        **env,
    }


def client_config(target: str) -> ChannelConfig:
    """How a test client outside the services (the chaos workload) reaches ``target``."""
    return channel_config(target)


class ServiceProcess:
    """``python -m <module> [args]`` with its output appended to ``log_path``."""

    def __init__(self, log_path: Path, args: list[str], env: Mapping[str, str]) -> None:
        self.log_path = log_path
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", *args],
            env=dict(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    async def wait(self, timeout: float) -> int:
        """The exit status; waits in a thread, so an in-process job service keeps serving."""
        return await asyncio.to_thread(self.process.wait, timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(10)
        self._log.close()


class WorkerProcess(ServiceProcess):
    """``python -m worker_service`` with its output in a log file the test can read."""

    def __init__(self, log_dir: Path, worker_id: str, nats_url: str, target: str, **env: str):
        self.worker_id = worker_id
        super().__init__(
            log_dir / f"{worker_id}.log",
            ["worker_service"],
            worker_env(nats_url, target, worker_id, **env),
        )


class JobServiceProcess(ServiceProcess):
    """``python -m job_service serve`` on 127.0.0.1:``port`` (migrations already applied)."""

    def __init__(
        self,
        log_dir: Path,
        instance_id: str,
        database_url: str,
        nats_url: str,
        port: int,
        **env: str,
    ):
        self.instance_id = instance_id
        self.target = f"127.0.0.1:{port}"
        super().__init__(
            log_dir / f"{instance_id}.log",
            ["job_service", "serve"],
            job_service_env(database_url, nats_url, port, instance_id, **env),
        )
