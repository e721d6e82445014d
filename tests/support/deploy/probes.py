"""kubelet's probes and compose's health checks: their timings and their actions."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.deploy import Obj


def seconds(duration: str | int | float) -> float:
    """A compose duration (``2s``, ``1m30s``, ``500ms``) in seconds."""
    if isinstance(duration, int | float):
        return float(duration)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    found = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert found and "".join(n + u for n, u in found) == duration, duration
    return sum(float(n) * units[u] for n, u in found)


@dataclass(frozen=True)
class ProbeTiming:
    initial_delay: float
    period: float
    timeout: float
    failure_threshold: int
    success_threshold: int

    @classmethod
    def of(cls, probe: Obj) -> ProbeTiming:
        """Kubernetes' defaults for what the probe leaves out."""
        return cls(
            probe.get("initialDelaySeconds", 0),
            probe.get("periodSeconds", 10),
            probe.get("timeoutSeconds", 1),
            probe.get("failureThreshold", 3),
            probe.get("successThreshold", 1),
        )

    @classmethod
    def of_healthcheck(cls, check: Obj) -> ProbeTiming:
        """Docker's: the first check one interval after start, unhealthy after ``retries``
        failures in a row."""
        interval = seconds(check.get("interval", "30s"))
        return cls(
            interval, interval, seconds(check.get("timeout", "30s")), check.get("retries", 3), 1
        )


def healthcheck_argv(test: list[str] | str) -> list[str]:
    if isinstance(test, str):
        return ["/bin/sh", "-c", test]
    if test[0] == "CMD-SHELL":
        return ["/bin/sh", "-c", test[1]]
    assert test[0] == "CMD", test
    return list(test[1:])


async def grpc_health(target: str, service: str, timeout: float) -> str | None:
    """A kubelet gRPC probe: the standard health service answers SERVING."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            answer = await stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.aio.AioRpcError as error:
            return f"{error.code().name}: {error.details()}"
    if answer.status != health_pb2.HealthCheckResponse.SERVING:
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))
    return None


async def http_ok(url: str, timeout: float) -> str | None:
    """A kubelet HTTP probe: any status from 200 to 399."""
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(url)
    except httpx.HTTPError as error:
        return f"{url}: {type(error).__name__} {error}"
    return None if 200 <= response.status_code < 400 else f"{url}: {response.status_code}"


async def tcp_open(host: str, port: int, timeout: float) -> str | None:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError) as error:
        return f"{host}:{port}: {error!r}"
    writer.close()
    return None
