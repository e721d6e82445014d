"""kube-proxy: a Service's address, each connection to the next ready endpoint, and the
Service links the kubelet puts in every container."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterable

from tests.support.deploy import Obj
from tests.support.deploy.kubelet import Pod


class ServiceProxy:
    """A Service's address: 127.0.0.1 and one local port per Service port; each connection
    goes to the next ready endpoint (pods matching the selector, not terminating; every
    matching pod for a headless Service publishing not-ready addresses), as kube-proxy
    does. Connections already open stay with their pod."""

    def __init__(self, service: Obj, pods: Callable[[], list[Pod]]) -> None:
        self.service = service
        self.name: str = service["metadata"]["name"]
        self._pods = pods
        self._servers: list[asyncio.Server] = []
        self._turn = 0
        self.local_ports: dict[int, int] = {}  # Service port → local port
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        for port in self.service["spec"]["ports"]:
            server = await asyncio.start_server(
                functools.partial(self._accepted, port=port), "127.0.0.1", 0
            )
            self._servers.append(server)
            self.local_ports[port["port"]] = server.sockets[0].getsockname()[1]

    def address(self, port: int) -> str:
        assert port in self.local_ports, f"Service {self.name} has no port {port}"
        return f"127.0.0.1:{self.local_ports[port]}"

    def endpoints(self) -> list[Pod]:
        selector = self.service["spec"].get("selector", {})
        not_ready_too = self.service["spec"].get("publishNotReadyAddresses", False)
        return [
            pod
            for pod in self._pods()
            if selector.items() <= pod.labels.items()
            and not pod.terminating
            and (pod.ready or not_ready_too)
        ]

    async def _accepted(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, port: Obj
    ) -> None:
        endpoints = self.endpoints()
        if not endpoints:
            writer.transport.abort()  # no endpoints: the connection is refused
            return
        self._turn += 1
        pod = endpoints[self._turn % len(endpoints)]
        target = port.get("targetPort", port["port"])
        number = target if isinstance(target, int) else pod.container.ports[str(target)]
        try:
            up_reader, up_writer = await asyncio.open_connection(pod.address, number)
        except OSError:
            writer.transport.abort()
            return
        pipes = {
            asyncio.ensure_future(_pipe(reader, up_writer)),
            asyncio.ensure_future(_pipe(up_reader, writer)),
        }
        self._pipes |= pipes
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            self._pipes -= pipes
            writer.transport.abort()
            up_writer.transport.abort()

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for pipe in set(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()


def service_links(proxies: Iterable[ServiceProxy]) -> dict[str, str]:
    """The variables the kubelet puts in every container for each Service of the namespace
    (enableServiceLinks, on by default), with the local addresses."""
    env: dict[str, str] = {}
    for proxy in proxies:
        spec = proxy.service["spec"]
        if spec.get("clusterIP") == "None":
            continue
        prefix = proxy.name.upper().replace("-", "_")
        env[f"{prefix}_SERVICE_HOST"] = "127.0.0.1"
        for index, port in enumerate(spec["ports"]):
            local = proxy.local_ports[port["port"]]
            if index == 0:
                env[f"{prefix}_SERVICE_PORT"] = str(local)
                env[f"{prefix}_PORT"] = f"tcp://127.0.0.1:{local}"
            if "name" in port:
                env[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(local)
            key = f"{prefix}_PORT_{port['port']}_TCP"
            env |= {
                key: f"tcp://127.0.0.1:{local}",
                f"{key}_PROTO": "tcp",
                f"{key}_PORT": str(local),
                f"{key}_ADDR": "127.0.0.1",
            }
    return env
