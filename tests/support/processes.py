"""Workers as separate OS processes, for the tests that kill, pause or terminate them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.stack import WORKER_TOKEN, client_env


class WorkerProcess:
    """``python -m worker_service`` with its output in a log file the test can read."""

    def __init__(self, log_dir: Path, worker_id: str, nats_url: str, target: str, **env: str):
        self.worker_id = worker_id
        self.log_path = log_dir / f"{worker_id}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "worker_service"],
            env={
                **os.environ,
                "JOBS_NATS_URL": nats_url,
                "JOBS_JOB_SERVICE_TARGET": target,
                "JOBS_WORKER_ID": worker_id,
                **client_env(WORKER_TOKEN),
                # off unless a test asks (port 0: many workers run at once)
                "JOBS_WORKER_METRICS_PORT": "off",
                **env,
            },
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    async def wait(self, timeout: float) -> int:
        """The exit status; waits in a thread, so the in-process job service keeps serving."""
        return await asyncio.to_thread(self.process.wait, timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(10)
        self._log.close()
