"""``make run``'s stack started for a test: ``python -m devstack`` as a user starts it, by the
main venv's Python, its output kept in a log.

``private_devstack`` is what the browser, interop and client-floor tests use: a private
data directory, free ports for every listener, the log copied to an artifacts folder when
the stack stops. ``tests/e2e/test_devstack.py`` uses ``Devstack`` itself, on a data
directory and port it restarts on, with the other ports left to devstack's defaults.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from devstack.embedded import free_port
from tests.support.wait import eventually

# the banner's line that says every process is up
READY = "The job engine is running."
# what would point the stack at someone else's PostgreSQL, NATS, tokens or master key
EXTERNAL = (
    "JOBS_DATABASE_URL",
    "JOBS_NATS_URL",
    "JOBS_AUTH_TOKENS",
    "JOBS_AUTH_TOKENS_FILE",
    "JOBS_CREDENTIALS_MASTER_KEY",
)
# how long a stopped stack may take to stop its children before it is killed
STOP_S = 60


class Devstack:
    """``python -m devstack`` on ``data_dir``, its stdout and stderr in ``log``.

    ``grpc_port`` defaults to a free port; ``free_ports`` gives the console and both
    metrics endpoints a free port each too (else devstack's defaults, as a user's ``make
    run`` has them). ``without`` names more environment variables to leave out besides
    ``EXTERNAL``."""

    def __init__(
        self,
        data_dir: Path,
        log: Path,
        *,
        grpc_port: int | None = None,
        free_ports: bool = True,
        without: Iterable[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.grpc_port = grpc_port or free_port()
        self.target = f"127.0.0.1:{self.grpc_port}"
        self.log = log
        left_out = {*EXTERNAL, *without}
        env = {k: v for k, v in os.environ.items() if k not in left_out}
        env |= {"JOBS_DATA_DIR": str(data_dir), "JOBS_GRPC_PORT": str(self.grpc_port)}
        if free_ports:
            env |= {
                "JOBS_CONSOLE_PORT": str(free_port()),
                "JOBS_METRICS_PORT": str(free_port()),
                "JOBS_WORKER_METRICS_PORT": str(free_port()),
            }
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devstack"], env=env, stdout=self._out, stderr=subprocess.STDOUT
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def ready(self, timeout: float = 120) -> None:
        """Until the banner says the engine is running; fails at once with the log if the
        stack exited first."""
        await eventually(
            lambda: READY in self.output() or self.process.poll() is not None,
            timeout=timeout,
            interval=0.1,
            message="devstack did not start",
        )
        assert READY in self.output(), self.output()

    def logged(self, pattern: str) -> str:
        """The first group of ``pattern``'s first match in the log (a banner's value)."""
        found = re.search(pattern, self.output())
        assert found is not None, pattern
        return found.group(1)

    def token_file(self, role: str) -> Path:
        """Where the stack wrote the generated token of ``role`` (client, admin, worker)."""
        return self.data_dir / f"{role}.token"

    def token(self, role: str) -> str:
        return self.token_file(role).read_text().strip()

    def stop(self) -> int:
        """Ctrl-C, as a user stops it; killed if still running after ``STOP_S``. Its exit
        status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()
        return self.process.returncode


@contextmanager
def private_devstack(
    prefix: str, artifacts: Path, *, without: Iterable[str] = ()
) -> Iterator[Devstack]:
    """A ``Devstack`` in a directory of its own (data and log) on free ports, stopped on
    exit, its log then copied to ``artifacts``/devstack.log and the directory removed. Not
    yet ready: await ``ready()`` (work that need not wait for the stack can run meanwhile).
    """
    # Not under pytest's basetemp (see tests/conftest.py: PostgreSQL needs a path it keeps).
    root = Path(tempfile.mkdtemp(prefix=prefix))
    stack = Devstack(root / "data", root / "devstack.log", without=without)
    try:
        yield stack
    finally:
        stack.stop()
        artifacts.mkdir(parents=True, exist_ok=True)
        shutil.copy(stack.log, artifacts / "devstack.log")
        shutil.rmtree(root, ignore_errors=True)
