"""The one server interceptor: per-RPC metrics (outermost: the final code), the
translation of exceptions to gRPC status, then auth — as three interceptors did, in one.

grpc.aio calls ``intercept_service`` on every call, and each of the three wrapped the
method's handler anew (issue 42: a CPU diet). Here the handler wrapped for metrics and
errors is built once per method and kept; only a refused call, or one held to a scoped
token, gets a handler of its own. The server's handlers are fixed at start-up, so a method
keeps its handler: the cache holds one entry per method the server has (an unknown method
is UNIMPLEMENTED and cached nowhere).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from job_service.adapters.grpc.auth import AuthInterceptor, TokenTable
from job_service.adapters.grpc.errors import guarded
from job_service.adapters.grpc.rpc_metrics import counted

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]


class CallInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, tokens: TokenTable) -> None:
        self._auth = AuthInterceptor(tokens)
        # method → (the server's handler, that handler counted and guarded)
        self._handlers: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        cached = self._handlers.get(method)
        if cached is None:
            handler = await continuation(handler_call_details)
            if handler is None:
                return None  # UNIMPLEMENTED, whoever asks
            cached = self._handlers[method] = (handler, _wrapped(handler, method))
        handler, wrapped = cached
        admitted = await self._auth.admitted(handler, continuation, handler_call_details)
        return wrapped if admitted is handler else _wrapped(admitted, method)


def _wrapped(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    return counted(guarded(handler, method), method)
