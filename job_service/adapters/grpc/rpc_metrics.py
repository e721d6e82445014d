"""Per-RPC metrics: the outermost server interceptor counts every call the server routes to
a handler by service, method and final status code, and times unary calls.

Outermost, so that it sees what the client sees: the code the error interceptor
translated an exception to, and the auth interceptor's refusals. Labels stay bounded: the
method comes from the server's own routing table (a call to a method no service has is
answered UNIMPLEMENTED by gRPC before any handler and counted nowhere), and the code is one
of gRPC's 17.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import Counter, Histogram

from shared.metrics import DURATION_BUCKETS, child

STARTED = Counter(
    "jobs_grpc_server_started_total",
    "RPCs started on the server, by service and method.",
    ["grpc_service", "grpc_method", "grpc_type"],
)
HANDLED = Counter(
    "jobs_grpc_server_handled_total",
    "RPCs completed on the server, by service, method and status code (OK, NOT_FOUND, ...).",
    ["grpc_service", "grpc_method", "grpc_type", "grpc_code"],
)
HANDLING_SECONDS = Histogram(
    "jobs_grpc_server_handling_seconds",
    "How long unary RPCs took on the server (streams such as WatchJob are not timed).",
    ["grpc_service", "grpc_method"],
    buckets=DURATION_BUCKETS,
)

UNARY = "unary"
SERVER_STREAM = "server_stream"


def split_method(full_method: str) -> tuple[str, str]:
    """``/jobs.v1.JobService/CreateJob`` → (``jobs.v1.JobService``, ``CreateJob``)."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return service or "unknown", method or "unknown"


def _code(context: grpc.aio.ServicerContext, error: BaseException | None) -> str:
    code = context.code()
    if not isinstance(code, grpc.StatusCode):
        if error is None:
            code = grpc.StatusCode.OK
        elif isinstance(error, asyncio.CancelledError):  # the client went away
            code = grpc.StatusCode.CANCELLED
        else:  # a raise no interceptor translated
            code = grpc.StatusCode.UNKNOWN
    name: str = code.name
    return name


class RpcMetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        return counted(handler, handler_call_details.method)


def counted(handler: grpc.RpcMethodHandler, full_method: str) -> grpc.RpcMethodHandler:
    """``handler`` counted (and, unary, timed) as the method ``full_method``."""
    service, method = split_method(full_method)
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _timed_unary(handler.unary_unary, service, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
        return grpc.unary_stream_rpc_method_handler(
            _counted_stream(handler.unary_stream, service, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler  # streams written with context.write (health Watch): not counted


def _timed_unary(behavior: Callable[..., Any], service: str, method: str) -> Callable[..., Any]:
    started = child(STARTED, service, method, UNARY)
    timer = child(HANDLING_SECONDS, service, method)

    async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
        started.inc()
        began = time.perf_counter()
        error: BaseException | None = None
        try:
            return await behavior(request, context)
        except BaseException as raised:
            error = raised
            raise
        finally:
            timer.observe(time.perf_counter() - began)
            child(HANDLED, service, method, UNARY, _code(context, error)).inc()

    return timed


def _counted_stream(behavior: Callable[..., Any], service: str, method: str) -> Callable[..., Any]:
    started = child(STARTED, service, method, SERVER_STREAM)

    async def counted(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        started.inc()
        error: BaseException | None = None
        try:
            async for response in behavior(request, context):
                yield response
        except BaseException as raised:
            error = raised
            raise
        finally:
            child(HANDLED, service, method, SERVER_STREAM, _code(context, error)).inc()

    return counted
