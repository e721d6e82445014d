"""Start-up's waits: until job_service reports SERVING on the standard gRPC health service,
until a child answers an HTTP check (the console's /healthz, the worker's /readyz); each
fails at once when the child exits or a stop is asked for, and after HEALTH_TIMEOUT_S."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.grpc_client import ChannelConfig, aio_channel

HEALTH_TIMEOUT_S = 60.0


class DevstackError(Exception):
    """Start-up failed or a child died: the message says which and why."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM arrived while starting up."""


async def wait_until_serving(target: str, exited: asyncio.Task[int], stop: asyncio.Event) -> None:
    """Poll the standard gRPC health service until job_service reports SERVING."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HEALTH_TIMEOUT_S
    request = health_pb2.HealthCheckRequest(service="")
    async with aio_channel(ChannelConfig.from_env(target)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            if exited.done():
                raise DevstackError(
                    f"job_service exited with status {exited.result()} before it was healthy"
                )
            if stop.is_set():
                raise Interrupted
            with contextlib.suppress(grpc.aio.AioRpcError):
                response = await stub.Check(request, timeout=1.0)
                if response.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            if loop.time() > deadline:
                raise DevstackError(
                    f"job_service not SERVING on {target} after {HEALTH_TIMEOUT_S}s"
                )
            # Poll interval; a stop request cuts it short.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)


async def wait_until_answering(
    child: str, url: str, what: str, exited: Callable[[], bool], stop: asyncio.Event
) -> None:
    """Until ``child`` answers ``url`` with success (``what`` names it in the error)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HEALTH_TIMEOUT_S
    async with httpx.AsyncClient() as http:
        while True:
            if stop.is_set():
                raise Interrupted
            if exited():
                raise DevstackError(f"the {child} exited before it was {what}")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(url, timeout=1)).is_success:
                    return
            if loop.time() > deadline:
                raise DevstackError(f"the {child} not {what} after {HEALTH_TIMEOUT_S}s ({url})")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
